"""Metrics recording: one :class:`~railgang.daemon.sim.metrics.JobRecord` per submitted job,
the number of jobs in the system over time (the N of finish-time fairness ρ), and the GPUs that
idle while a waiting job would fit (work conservation).

Work conservation is bookkeeping of what each decision cycle left behind, never an input to it:
after a cycle, its pending jobs are walked in the core's order and each one whose minimum size
fits the GPUs still free (by count) claims that many; the claimed GPUs stay idle until the next
cycle, and those GPU-seconds are charged to the claiming job's record under the reason the core
gave it (``priority``, ``fragmented``, ``preemption_budget``...). One refinement: the core says
``priority`` both for a job behind a strict FIFO head ("FIFO: behind ...") and for one held back
because it would delay a backfill reservation; the latter is charged to ``reserved``, the
documented EASY-style reservation that idles those GPUs (bounded: at most the GPUs free now, and
only until the holder's shadow time). Completions between two cycles of a
``cycle_s`` quantum are not seen until the next cycle, so that latency is not counted.

The backend tells the recorder what happened (arrived, rejected, left, finished); progress
integrals are written into the records by the jobs' accounting (``accounting.SimJob``). The
metrics themselves are computed afterwards from the records alone (``metrics.compute``).
"""

from __future__ import annotations

from collections.abc import Iterable

from railgang.daemon.core.model.reasons import PendingReason, Reason
from railgang.daemon.sim.metrics import JobRecord
from railgang.daemon.sim.traces.model import TraceJob


def _charge_to(pr: PendingReason) -> str:
    """The reason an idle GPU is charged to (see the module docstring).

    A job held back because it would delay the backfill reservation is the one ``priority`` the
    place phase gives without a detail (``phases._missed``; the FIFO head, policy-order and quota
    kinds all say why). It is recognised by that, not by a ``reserved`` job in the same cycle: the
    evict phase may replace the holder's ``reserved`` with ``preemption_budget`` or
    ``preempting`` when it tries to make room for it, which charged ~12,000 GPU-h of `default`'s
    reservation idling on Philly VC 6214e9 to ``priority``.
    """
    if pr.code is Reason.PRIORITY and not pr.detail:
        return Reason.RESERVED.value
    return pr.code.value


class Recorder:
    """Every job's record, in arrival order, and ∫ jobs-in-system dt."""

    def __init__(self) -> None:
        self.records: list[JobRecord] = []
        self.finished = 0
        self._in_system = 0
        self._integral = 0.0  # ∫ jobs in system dt up to ``_integral_t``
        self._integral_t = 0.0
        self._by_id: dict[str, JobRecord] = {}
        # what the last cycle left idle: (record, reason, GPUs) claimed, and since when
        self._idle_claims: list[tuple[JobRecord, str, int]] = []
        self._idle_since = 0.0

    def record(self, tj: TraceJob) -> JobRecord:
        """A job arrived: its record (kept even if it is rejected)."""
        rec = JobRecord(job_id=tj.job_id, account=tj.account, gpus=tj.gpus,
                        submit=tj.submit_time, duration_s=tj.duration_s)
        self.records.append(rec)
        self._by_id[tj.job_id] = rec
        return rec

    def cycle(self, now: float, free_gpus: int, reasons: Iterable[PendingReason]) -> None:
        """A decision cycle ended at ``now`` with ``free_gpus`` idle and these jobs pending.

        Charges the interval since the previous cycle to what that cycle left idle, then walks
        this cycle's pending jobs (the core's order) claiming free GPUs for each that fits.
        """
        span = now - self._idle_since
        if span > 0:
            for rec, reason, gpus in self._idle_claims:
                rec.idle_fit_gpu_s[reason] = rec.idle_fit_gpu_s.get(reason, 0.0) + gpus * span
        self._idle_since = now
        claims: list[tuple[JobRecord, str, int]] = []
        left = free_gpus
        for pr in reasons:
            if left <= 0:
                break
            if pr.code is Reason.LARGER_THAN_CLUSTER or not 0 < pr.needed <= left:
                continue
            waiting = self._by_id.get(pr.job_id)
            if waiting is not None:
                claims.append((waiting, _charge_to(pr), pr.needed))
                left -= pr.needed
        self._idle_claims = claims

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
