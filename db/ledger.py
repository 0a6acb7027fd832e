"""Ledger side tables: job labels, ingest watermarks and telemetry samples.

The ledger segments themselves are ``db.models.UsageRecord`` rows, keyed by (job, segment
start) so re-reading the same Slurm accounting record updates the row instead of adding one.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String
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


class ProgressSample(Base):
    """One progress report of the training helper (``rg-progress:step=..,sps=..,t=..``)."""

    __tablename__ = "progress_samples"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"),
                                        primary_key=True)
    t_epoch: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    step: Mapped[float] = mapped_column(Float)
    sps: Mapped[float] = mapped_column(Float)


__all__ = ["GpuSample", "JobLabel", "LedgerWatermark", "ProgressSample"]
