"""Quota, class, rate and audit models around the account tree of ``db.models.Account``.

The tree itself (organisation -> department -> team, a team being a Slurm account) is the
``accounts`` table. The quota over all GPU types lives on the account row (``guaranteed_gpus``,
``limit_gpus``); a quota for one GPU type or pool is an ``AccountQuota`` row. Both are checked
against the hierarchy by ``db.repositories.org`` before anything is written.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from railgang.db.base import Base, UTCDateTime
from railgang.db.choices import CAPACITY_TIERS, GRANT_KINDS

EVENT_KINDS = ("borrow", "reclaim", "lose-proposal", "restore")
EVENT_STATES = ("recorded", "proposed", "approved", "rejected")


class AccountQuota(Base):
    """Guarantee and burst limit of one account for one GPU type or pool (e.g. ``h200``)."""

    __tablename__ = "account_quotas"

    id: Mapped[int] = mapped_column(primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    gpu_type: Mapped[str] = mapped_column(String(32))
    guaranteed_gpus: Mapped[int] = mapped_column(Integer, default=0)
    limit_gpus: Mapped[int | None] = mapped_column(Integer)  # None = no ceiling of its own

    __table_args__ = (
        UniqueConstraint("account_id", "gpu_type", name="account_gpu_type"),
        CheckConstraint("guaranteed_gpus >= 0", name="guaranteed_nonneg"),
    )


class PriorityClass(Base):
    """Class 0 (serving) .. 3 (best effort); 0-2 must be granted before a job may claim them."""

    __tablename__ = "priority_classes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(32), unique=True)
    preemptible: Mapped[bool] = mapped_column(Boolean, default=True)
    max_time_s: Mapped[int | None] = mapped_column(Integer)  # class 2's short time limit
    needs_grant: Mapped[bool] = mapped_column(Boolean, default=True)
    description: Mapped[str] = mapped_column(String(256), default="")


class ClassGrant(Base):
    """An account, user or QOS allowed to submit in a priority class (read by job_submit.lua
    through the grants file the daemon keeps current)."""

    __tablename__ = "class_grants"

    id: Mapped[int] = mapped_column(primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("priority_classes.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(8))
    subject: Mapped[str] = mapped_column(String(64))
    granted_by: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (
        UniqueConstraint("class_id", "kind", "subject", name="class_kind_subject"),
        CheckConstraint("kind IN ('account', 'user', 'qos')", name="kind"),
    )


class Rate(Base):
    """Price of one GPU-hour of a GPU type on a capacity tier (chargeback)."""

    __tablename__ = "rates"

    id: Mapped[int] = mapped_column(primary_key=True)
    gpu_type: Mapped[str] = mapped_column(String(32))
    capacity: Mapped[str] = mapped_column(String(16))
    per_gpu_hour: Mapped[float] = mapped_column(Float)
    currency: Mapped[str] = mapped_column(String(8), default="USD")

    __table_args__ = (
        UniqueConstraint("gpu_type", "capacity", name="gpu_type_capacity"),
        CheckConstraint("per_gpu_hour >= 0", name="nonneg"),
        CheckConstraint("capacity IN ('reserved', 'on-demand', 'spot', 'borrowed')",
                        name="capacity"),
    )


class QuotaEvent(Base):
    """Borrow, reclaim, use-it-or-lose-it proposal and the admin's decision on it."""

    __tablename__ = "quota_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(12))
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"),
                                            index=True)
    gpu_type: Mapped[str] = mapped_column(String(32), default="*")
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    detail: Mapped[str] = mapped_column(String(512), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    decided_by: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (
        CheckConstraint("kind IN ('borrow', 'reclaim', 'lose-proposal', 'restore')", name="kind"),
        CheckConstraint("state IN ('recorded', 'proposed', 'approved', 'rejected')",
                        name="state"),
    )


class AuditEntry(Base):
    """One admin change: who, what, on which object, the object before and after (JSON)."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(128))
    before: Mapped[str | None] = mapped_column(Text)
    after: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (Index("ix_audit_log_at", "at"),)


__all__ = [
    "CAPACITY_TIERS",
    "EVENT_KINDS",
    "EVENT_STATES",
    "GRANT_KINDS",
    "AccountQuota",
    "AuditEntry",
    "ClassGrant",
    "PriorityClass",
    "QuotaEvent",
    "Rate",
]
