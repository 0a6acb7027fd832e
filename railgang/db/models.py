"""Typed ORM models: the account hierarchy, jobs railgang has seen, the usage ledger, and the
daemon's own state (action journal, cycles, per-job explanations, leader).

The usage ledger is append-only and keyed by (job, segment) so a daemon that restarts and
re-reads Slurm records the same interval once (idempotent), never twice and never zero times.
The action journal is written ``planned`` and committed before an action is sent to Slurm, then
``applied``/``failed``; after a crash, reconciliation against Slurm settles what is left
``planned`` as ``applied`` or ``abandoned`` (docs/daemon.md).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
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
    # issue 9: a finished job's actual/requested run time, for the start-time estimate's history
    time_limit_s: Mapped[int | None] = mapped_column(Integer)  # None: unlimited or unknown
    run_s: Mapped[int | None] = mapped_column(Integer)  # its last run's length, once finished
    ended_epoch: Mapped[int | None] = mapped_column(BigInteger, index=True)
    # issue 18 row 14: Slurm reuses job ids (the id wraps at MaxJobId, or slurmctld's state is
    # reset), so a job is (cluster, job id, the submit time of its first record); 0: a row from
    # before migration 0008, whatever its submit time was
    submit_epoch: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")

    __table_args__ = (UniqueConstraint("cluster", "slurm_job_id", "submit_epoch",
                                       name="cluster_job_submit"),)


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
    # issue 8: the segment's key is (job, start); epochs make interval sums portable SQL
    user: Mapped[str] = mapped_column(String(64), default="")
    capacity: Mapped[str] = mapped_column(String(16), default="reserved")  # rates' tier
    start_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    end_epoch: Mapped[int | None] = mapped_column(BigInteger)  # None while the segment is open
    gpu_ids: Mapped[str] = mapped_column(String(1024), default="")  # "n01:0-3,n02:0-3" if known
    source: Mapped[str] = mapped_column(String(16), default="sacct")

    job: Mapped[Job] = relationship()

    __table_args__ = (
        UniqueConstraint("job_id", "start_epoch", name="job_start"),
        CheckConstraint("gpus > 0", name="gpus_positive"),
        CheckConstraint("tier IN ('guaranteed', 'borrowed', 'opportunistic')", name="tier"),
        Index("ix_usage_records_account_start", "account", "start_epoch"),
        Index("ix_usage_records_end_epoch", "end_epoch"),
    )


JOURNAL_STATES = ("planned", "applied", "failed", "abandoned")


class JournalEntry(Base):
    """One action of one cycle: written ``planned`` (and committed) before it is sent."""

    __tablename__ = "action_journal"

    id: Mapped[int] = mapped_column(primary_key=True)
    cycle_id: Mapped[int] = mapped_column(Integer, index=True)
    seq: Mapped[int] = mapped_column(Integer)  # position in the cycle's batch (apply order)
    kind: Mapped[str] = mapped_column(String(16))  # start | resize | preempt | set_priority | ...
    job_id: Mapped[str | None] = mapped_column(String(32))
    node: Mapped[str | None] = mapped_column(String(64))
    payload: Mapped[str] = mapped_column(Text)  # canonical JSON of the action (sorted keys)
    idem_key: Mapped[str] = mapped_column(String(64), unique=True)  # sha256(cycle, kind, payload)
    state: Mapped[str] = mapped_column(String(12))
    detail: Mapped[str] = mapped_column(String(512), default="")  # Slurm's answer / verdict why
    planned_at: Mapped[datetime] = mapped_column(UTCDateTime())
    settled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        CheckConstraint("state IN ('planned', 'applied', 'failed', 'abandoned')", name="state"),
        Index("ix_action_journal_state_id", "state", "id"),
    )


class DaemonCycle(Base):
    """One daemon cycle: who ran it, what it saw and did, how long each phase took."""

    __tablename__ = "daemon_cycles"

    id: Mapped[int] = mapped_column(primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    leader: Mapped[str] = mapped_column(String(128))  # "host:pid"
    policy: Mapped[str] = mapped_column(String(32))
    pending: Mapped[int] = mapped_column(Integer, default=0)
    running: Mapped[int] = mapped_column(Integer, default=0)
    actions: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    timings: Mapped[str] = mapped_column(Text, default="{}")  # JSON: phase -> milliseconds
    error: Mapped[str | None] = mapped_column(String(512))


class JobExplanation(Base):
    """The latest word of the core on one job (one row per job; ``explain`` reads it)."""

    __tablename__ = "job_explanations"

    job_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    cycle_id: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    state: Mapped[str] = mapped_column(String(12))  # waiting | running | gone
    account: Mapped[str] = mapped_column(String(64), default="")
    priority_class: Mapped[int] = mapped_column(Integer, default=3)
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str | None] = mapped_column(String(32))  # Reason.value while waiting
    detail: Mapped[str] = mapped_column(String(512), default="")
    position: Mapped[int | None] = mapped_column(Integer)  # 1-based place in the policy's order
    queue_length: Mapped[int | None] = mapped_column(Integer)
    nodes: Mapped[str] = mapped_column(String(1024), default="")  # hostlist while running
    data: Mapped[str] = mapped_column(Text, default="{}")  # JSON: numbers, blockers, placement

    __table_args__ = (
        CheckConstraint("state IN ('waiting', 'running', 'gone')", name="state"),
    )


class DaemonLeader(Base):
    """Who holds (or last held) the leader lock; the lock itself lives in PostgreSQL or a file."""

    __tablename__ = "daemon_leader"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1
    host: Mapped[str] = mapped_column(String(128))
    pid: Mapped[int] = mapped_column(Integer)
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime())
    backend: Mapped[str] = mapped_column(String(16))
    policy: Mapped[str] = mapped_column(String(32))


# the issue-8 tables (quotas, classes, rates, tokens, audit, ledger side tables) live in their own
# modules; importing them here registers them on Base.metadata wherever the models are loaded
from railgang.db import auth, estimates, ledger, org, steps  # noqa: E402, F401

__all__ = [
    "JOURNAL_STATES",
    "Account",
    "DaemonCycle",
    "DaemonLeader",
    "Job",
    "JobExplanation",
    "JournalEntry",
    "UsageRecord",
]
