"""Typed ORM models: the account hierarchy, jobs railgang has seen, and the usage ledger.

The usage ledger is append-only and keyed by (job, segment) so a daemon that restarts and
re-reads Slurm records the same interval once (idempotent), never twice and never zero times.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from railgang.db.base import Base, UTCDateTime


class Account(Base):
    """organisation -> department -> team; a team is a Slurm account."""

    __tablename__ = "accounts"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    level: Mapped[str] = mapped_column(String(16))  # org | dept | team
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("accounts.id"))
    guaranteed_gpus: Mapped[int] = mapped_column(Integer, default=0)
    limit_gpus: Mapped[int | None] = mapped_column(Integer)  # burst ceiling; None = no ceiling
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    parent: Mapped[Account | None] = relationship(remote_side=[id])

    __table_args__ = (
        CheckConstraint("level IN ('org', 'dept', 'team')", name="level"),
        CheckConstraint("guaranteed_gpus >= 0", name="guaranteed_nonneg"),
    )


class Job(Base):
    """A Slurm job railgang has observed, with the hints it was submitted with."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(primary_key=True)
    slurm_job_id: Mapped[str] = mapped_column(String(32))
    cluster: Mapped[str] = mapped_column(String(64))
    account: Mapped[str] = mapped_column(String(64))
    user: Mapped[str] = mapped_column(String(64))
    gpus: Mapped[int] = mapped_column(Integer)
    priority_class: Mapped[int] = mapped_column(Integer, default=3)
    hints: Mapped[str] = mapped_column(String(256), default="")  # e.g. "tp8,pp4,dp8;elastic=4:16"
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(24))

    __table_args__ = (UniqueConstraint("cluster", "slurm_job_id", name="cluster_job"),)


class UsageRecord(Base):
    """One interval during which a job held a fixed set of GPUs (resizes start new segments)."""

    __tablename__ = "usage_records"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"))
    segment: Mapped[int] = mapped_column(Integer)
    account: Mapped[str] = mapped_column(String(64))
    gpu_type: Mapped[str] = mapped_column(String(32))
    gpus: Mapped[int] = mapped_column(Integer)
    nodes: Mapped[str] = mapped_column(String(1024))  # Slurm hostlist expression
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    tier: Mapped[str] = mapped_column(String(16), default="guaranteed")
    compute_fraction: Mapped[float | None] = mapped_column(Float)  # GPU kernels active
    productive_fraction: Mapped[float | None] = mapped_column(Float)  # advancing model state

    job: Mapped[Job] = relationship()

    __table_args__ = (
        UniqueConstraint("job_id", "segment", name="job_segment"),
        CheckConstraint("gpus > 0", name="gpus_positive"),
        CheckConstraint("tier IN ('guaranteed', 'borrowed', 'opportunistic')", name="tier"),
    )


__all__ = ["Account", "Job", "UsageRecord"]
