"""Honest start-time intervals: widen the simulated p10-p90 by how often it has missed.

The forward simulation's spread only covers what it varies (run times); the largest misses come
from what it cannot know (later arrivals that overtake, jobs cancelled early). Measured on
replayed traces, its p10-p90 held only 30-50 % of actual starts instead of 80 %. This module
calibrates it the split-conformal way (conformalized quantile regression, Romano et al., NeurIPS
2019), online: every interval the daemon showed for a job is kept until the job starts, then
scored by how far outside it the start fell, in log time (a 2 h miss on a 10 min estimate is
worse than on a 2-day one):

    s = max(log((lo + c) / (a + c)), log((a + c) / (hi + c)))     a: actual wait, c: one quantum

``s`` <= 0 means the start fell inside. The interval shown is the raw one widened by the
``ceil((n + 1) · 0.8) / n`` empirical quantile ``q`` of the newest ``n`` scores:
``lo' = (lo + c)·e^-q - c``, ``hi' = (hi + c)·e^q - c``. Under exchangeable errors that covers
80 % of future starts; the window of recent scores follows drift. Intervals are only widened,
never narrowed (an interval too wide is honest, one too narrow is not), and not at all before
``min_scores`` starts were seen. Scores always use the raw interval, so widening never feeds on
itself. The daemon stores the scores (``estimate_history.save_scores``) and a restarted one
reads them back.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from railgang.daemon.core.model.snapshot import Snapshot


@dataclass(frozen=True)
class Shown:
    """One interval shown for a waiting job, in seconds from ``made_at`` (hi None: unbounded)."""

    made_at: float
    lo_s: float
    hi_s: float | None


class IntervalCalibration:
    """Scores of settled intervals and the widening they call for; see the module docstring."""

    def __init__(self, *, coverage: float = 0.8, keep: int = 1000, min_scores: int = 20,
                 quantum_s: float = 60.0, per_job: int = 24) -> None:
        if not 0.0 < coverage < 1.0:
            raise ValueError(f"coverage must be in (0, 1), not {coverage}")
        self.coverage, self.min_scores, self.c = coverage, max(1, min_scores), max(1.0, quantum_s)
        self.per_job = max(1, per_job)
        self.keep = max(1, keep)
        self._scores: deque[float] = deque(maxlen=self.keep)
        self._open: dict[str, list[Shown]] = {}  # job -> intervals shown while it waited
        self._unsaved: list[float] = []  # settled since the last drain_new (for the database)

    # -- learning ---------------------------------------------------------------------------
    def score(self, lo_s: float, hi_s: float | None, actual_s: float) -> float:
        a = math.log(max(0.0, actual_s) + self.c)
        below = math.log(max(0.0, lo_s) + self.c) - a
        above = -math.inf if hi_s is None else a - math.log(max(0.0, hi_s) + self.c)
        return max(below, above)

    def add(self, lo_s: float, hi_s: float | None, actual_s: float) -> None:
        self._scores.append(self.score(lo_s, hi_s, actual_s))

    def shown(self, job_id: str, made_at: float, lo_s: float, hi_s: float | None) -> None:
        """Remember a raw interval shown for ``job_id``; a long wait keeps every other one
        (at most ``per_job``), so one job cannot outweigh many."""
        kept = self._open.setdefault(job_id, [])
        kept.append(Shown(made_at, lo_s, hi_s))
        if len(kept) > self.per_job:
            self._open[job_id] = kept[::2]

    def observe(self, snapshot: Snapshot) -> int:
        """Settle the intervals of jobs that started by ``snapshot`` (their start is known now);
        forget those of jobs gone without starting (cancelled). Returns scores added."""
        added = 0
        pending = {j.job_id for j in snapshot.pending}
        for job_id in list(self._open):
            run = snapshot.running.get(job_id)
            if run is not None:
                for s in self._open.pop(job_id):
                    self.add(s.lo_s, s.hi_s, run.start_time - s.made_at)
                    self._unsaved.append(self._scores[-1])
                    added += 1
            elif job_id not in pending:
                del self._open[job_id]
        return added

    def load(self, scores: Iterable[float]) -> int:
        """Scores kept from an earlier run of the daemon, oldest first; returns how many."""
        n = 0
        for score in scores:
            if math.isfinite(score):
                self._scores.append(score)
                n += 1
        return n

    def drain_new(self) -> list[float]:
        """The scores settled since the last call, to be stored."""
        out, self._unsaved = self._unsaved, []
        return out

    # -- using ------------------------------------------------------------------------------
    @property
    def scores(self) -> int:
        return len(self._scores)

    def margin(self) -> float | None:
        """``q`` in log time (>= 0), or None while fewer than ``min_scores`` starts were seen."""
        n = len(self._scores)
        if n < self.min_scores:
            return None
        ranked = sorted(self._scores)
        k = min(n, math.ceil((n + 1) * self.coverage))
        return max(0.0, ranked[k - 1])

    def widen(self, lo_s: float, hi_s: float | None) -> tuple[float, float | None]:
        q = self.margin()
        if not q:
            return lo_s, hi_s
        lo = max(0.0, (lo_s + self.c) * math.exp(-q) - self.c)
        hi = None if hi_s is None else (hi_s + self.c) * math.exp(q) - self.c
        return lo, hi

    def describe(self) -> dict[str, float | int | None]:
        q = self.margin()
        return {"calibrated_on": self.scores, "target_coverage": self.coverage,
                "widened_by": None if q is None else round(math.exp(q), 2)}


@dataclass(frozen=True)
class Coverage:
    """Shares of actual starts inside the interval: raw, as shown (calibrated where enough
    starts were known), and among the intervals that were calibrated."""

    intervals: int
    raw: float | None
    shown: float | None
    calibrated: int  # intervals made after ``min_scores`` starts were known
    once_calibrated: float | None


def online_coverage(intervals: Iterable[tuple[float, float, float | None, float]],
                    calibration: IntervalCalibration) -> Coverage:
    """Coverage as a daemon would have shown the intervals: each ``(made_at, lo_s, hi_s,
    actual_s)`` is widened by the scores of the starts known by its ``made_at`` only."""
    # by time only: two intervals made at once may tie on lo and have hi None (beyond horizon)
    rows = sorted(intervals, key=lambda r: (r[0], r[3], r[1]))
    settled = sorted(((made + actual, lo, hi, actual) for made, lo, hi, actual in rows),
                     key=lambda r: (r[0], r[3], r[1]))
    i = raw_in = shown_in = calibrated = calibrated_in = 0
    for made, lo, hi, actual in rows:
        while i < len(settled) and settled[i][0] <= made:
            calibration.add(settled[i][1], settled[i][2], settled[i][3])
            i += 1
        raw_in += lo <= actual <= (math.inf if hi is None else hi)
        wlo, whi = calibration.widen(lo, hi)
        inside = wlo <= actual <= (math.inf if whi is None else whi)
        shown_in += inside
        if calibration.margin() is not None:
            calibrated += 1
            calibrated_in += inside
    n = len(rows)
    return Coverage(n, raw_in / n if n else None, shown_in / n if n else None, calibrated,
                    calibrated_in / calibrated if calibrated else None)


__all__ = ["Coverage", "IntervalCalibration", "Shown", "online_coverage"]
