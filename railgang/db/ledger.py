"""Ledger side tables: job labels, ingest watermarks, telemetry samples and node states.

The ledger segments themselves are ``db.models.UsageRecord`` rows, keyed by (job, segment
start) so re-reading the same Slurm accounting record updates the row instead of adding one.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from railgang.db.base import Base, UTCDateTime


class JobLabel(Base):
    """A label of a job (experiment, model version, ...) for chargeback by label."""

    __tablename__ = "job_labels"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"),
                                        primary_key=True)
    key: Mapped[str] = mapped_column(String(32), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))

    __table_args__ = (Index("ix_job_labels_key_value", "key", "value"),)


class LedgerWatermark(Base):
    """How far a source (e.g. ``sacct:railgang``) has been ingested; written in the same
    transaction as the segments, so a crash leaves either both or neither."""

    __tablename__ = "ledger_watermarks"

    source: Mapped[str] = mapped_column(String(64), primary_key=True)
    ingested_until: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class GpuSample(Base):
    """One utilisation sample of one GPU (DCGM exporter or nvidia-smi), keyed so that the same
    sample read twice is stored once."""

    __tablename__ = "gpu_samples"

    node: Mapped[str] = mapped_column(String(64), primary_key=True)
    gpu: Mapped[int] = mapped_column(Integer, primary_key=True)
    at_epoch_ms: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    sm_util: Mapped[float] = mapped_column(Float)  # 0..100, a kernel was running
    mem_used_mib: Mapped[float | None] = mapped_column(Float)
    power_w: Mapped[float | None] = mapped_column(Float)

    # the report reads a time window of every GPU: the key leads with the node (issue 23)
    __table_args__ = (Index("ix_gpu_samples_at_epoch_ms", "at_epoch_ms"),)


class NodeState(Base):
    """A node of the fleet as ``sinfo`` showed it from ``at_epoch`` on (until the node's next
    row): the report's inventory (pool sizes count idle nodes too) and its down/drained list."""

    __tablename__ = "node_states"

    id: Mapped[int] = mapped_column(primary_key=True)
    cluster: Mapped[str] = mapped_column(String(64))
    node: Mapped[str] = mapped_column(String(64))
    at_epoch: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(24))  # idle, mixed, allocated, drain, down, ...
    gpu_type: Mapped[str] = mapped_column(String(32))
    gpus: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(256), default="")

    __table_args__ = (
        UniqueConstraint("cluster", "node", "at_epoch", name="node_at"),
        Index("ix_node_states_at_epoch", "at_epoch"),
    )


class ProgressSample(Base):
    """One progress report of the training helper (``rg-progress:step=..,sps=..,t=..``)."""

    __tablename__ = "progress_samples"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"),
                                        primary_key=True)
    t_epoch: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    step: Mapped[float] = mapped_column(Float)
    sps: Mapped[float] = mapped_column(Float)


__all__ = ["GpuSample", "JobLabel", "LedgerWatermark", "NodeState", "ProgressSample"]
