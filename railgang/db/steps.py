"""Step timings of training jobs: how long a step took and how much of it the kernels computed.

The report's communication-bound detector (DESIGN R-Q7: step time > 1.5x compute) reads them;
the training helper's profiler or the simulator (``daemon/sim/telemetry.py``) writes them. Keyed
by (job, time) so the same report read twice is stored once.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Float, ForeignKey
from sqlalchemy.orm import Mapped, mapped_column

from railgang.db.base import Base


class StepTiming(Base):
    __tablename__ = "step_timings"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"),
                                        primary_key=True)
    t_epoch: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    step_s: Mapped[float] = mapped_column(Float)  # wall time of one step
    compute_s: Mapped[float] = mapped_column(Float)  # of which kernels computed

    __table_args__ = (CheckConstraint("step_s >= 0 AND compute_s >= 0", name="nonneg"),)


__all__ = ["StepTiming"]
