"""Metrics recording: one :class:`~railgang.daemon.sim.metrics.JobRecord` per submitted job and
the number of jobs in the system over time (the N of finish-time fairness ρ).

The backend tells the recorder what happened (arrived, rejected, left, finished); progress
integrals are written into the records by the jobs' accounting (``accounting.SimJob``). The
metrics themselves are computed afterwards from the records alone (``metrics.compute``).
"""

from __future__ import annotations

from railgang.daemon.sim.metrics import JobRecord
from railgang.daemon.sim.traces.model import TraceJob


class Recorder:
    """Every job's record, in arrival order, and ∫ jobs-in-system dt."""

    def __init__(self) -> None:
        self.records: list[JobRecord] = []
        self.finished = 0
        self._in_system = 0
        self._integral = 0.0  # ∫ jobs in system dt up to ``_integral_t``
        self._integral_t = 0.0

    def record(self, tj: TraceJob) -> JobRecord:
        """A job arrived: its record (kept even if it is rejected)."""
        rec = JobRecord(job_id=tj.job_id, account=tj.account, gpus=tj.gpus,
                        submit=tj.submit_time, duration_s=tj.duration_s)
        self.records.append(rec)
        return rec

    def integral_at(self, now: float) -> float:
        """∫ jobs in system dt from the start up to ``now``."""
        return self._integral + self._in_system * max(0.0, now - self._integral_t)

    def entered(self, now: float) -> None:
        self._count(now, +1)

    def left(self, now: float) -> None:
        """A job left the system without finishing (rejected after it was admitted)."""
        self._count(now, -1)

    def completed(self, rec: JobRecord, entered_integral: float, now: float) -> None:
        """A job finished at ``now``; ``entered_integral`` is :meth:`integral_at` its arrival."""
        rec.finish = now
        span = now - rec.submit
        rec.mean_jobs_in_system = ((self.integral_at(now) - entered_integral) / span
                                   if span > 0 else 1.0)
        self._count(now, -1)
        self.finished += 1

    def _count(self, now: float, delta: int) -> None:
        if now > self._integral_t:
            self._integral += self._in_system * (now - self._integral_t)
            self._integral_t = now
        self._in_system += delta


__all__ = ["Recorder"]
