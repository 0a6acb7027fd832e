"""Honest start-time intervals: widen the simulated p10-p90 by how it has missed, on each side.

The forward simulation's spread only covers what it varies (run times); the largest misses come
from what it cannot know (later arrivals that overtake, jobs cancelled early). Measured on
replayed traces, its p10-p90 held only 30-50 % of actual starts instead of 80 %. This module
calibrates it the conformal way (conformalized quantile regression, Romano et al., NeurIPS
2019), online: every interval the daemon showed for a job is kept until the job starts, then
scored by how far outside each end the start fell, in log time (a 2 h miss on a 10 min
estimate is worse than on a 2-day one):

    early = log((lo + c) / (a + c)),  late = log((a + c) / (hi + c))     a: actual wait, c: a quantum

Both <= 0 means the start fell inside. Each side is calibrated on its own (the asymmetric
variant of that paper, its theorem 2): the shown interval is ``lo' = (lo + c)·e^-q_early - c``,
``hi' = (hi + c)·e^q_late - c``, where ``q_early`` and ``q_late`` are the ``ceil((n + 1)·(1 -
α/2)) / n`` empirical quantiles of the newest ``n`` early and late scores. The misses are
lopsided (estimates from time limits alone start jobs too late, so nearly every miss is early):
one symmetric score widened the side that never missed as much as the other, 4x wider intervals
for the same coverage on the limits-only estimate.

Under exchangeable errors that covers ``1 - α`` = 80 % of future starts. The errors are not
exchangeable over a trace: as the queue grows the newest scores under-state the next misses (on
Philly limits-only intervals held 66 %, not 80 %), and as it drains they over-state them.
So ``α`` itself is learnt online, adaptive conformal inference (Gibbs and Candès, NeurIPS 2021):
when a job starts, ``α += step · (target α - share of its shown intervals that missed)``; over
any stretch the shown intervals' miss rate tends to the target, whatever the drift. One step
per started job, not per interval, so a long wait (many intervals, one outcome) counts once.

Intervals are only widened, never narrowed (an interval too wide is honest, one too narrow is
not), and not at all before ``min_scores`` starts were seen. Scores always use the raw interval,
so widening never feeds on itself. The daemon stores each interval's larger score
(``estimate_history.save_scores``); a restarted daemon reads them back as both sides (at least
as wide as the two-sided scores they stand for) and starts ``α`` from the target again.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from railgang.daemon.core.model.snapshot import Snapshot


@dataclass(frozen=True)
class Shown:
    """One interval shown for a waiting job, in seconds from ``made_at`` (hi None: unbounded),
    with the widening it was shown with (None: shown raw, before calibration)."""

    made_at: float
    lo_s: float
    hi_s: float | None
    margins: tuple[float, float] | None = None


class IntervalCalibration:
    """Scores of settled intervals and the widening they call for; see the module docstring."""

    def __init__(self, *, coverage: float = 0.8, keep: int = 1000, min_scores: int = 20,
                 quantum_s: float = 60.0, per_job: int = 24, step: float = 0.02) -> None:
        if not 0.0 < coverage < 1.0:
            raise ValueError(f"coverage must be in (0, 1), not {coverage}")
        self.coverage, self.min_scores, self.c = coverage, max(1, min_scores), max(1.0, quantum_s)
        self.per_job = max(1, per_job)
        self.keep = max(1, keep)
        self.step = max(0.0, step)  # the ACI step γ: how fast the level follows drift
        self.alpha = 1.0 - coverage  # the miss rate aimed at now (ACI's α_t)
        self._early: deque[float] = deque(maxlen=self.keep)
        self._late: deque[float] = deque(maxlen=self.keep)
        self._margins: tuple[float, float] | None = None  # cached until scores or α change
        self._open: dict[str, list[Shown]] = {}  # job -> intervals shown while it waited
        self._unsaved: list[float] = []  # settled since the last drain_new (for the database)

    # -- learning ---------------------------------------------------------------------------
    def sides(self, lo_s: float, hi_s: float | None, actual_s: float) -> tuple[float, float]:
        """``(early, late)``: how far before ``lo`` and after ``hi`` the start fell, log time."""
        a = math.log(max(0.0, actual_s) + self.c)
        early = math.log(max(0.0, lo_s) + self.c) - a
        late = -math.inf if hi_s is None else a - math.log(max(0.0, hi_s) + self.c)
        return early, late

    def score(self, lo_s: float, hi_s: float | None, actual_s: float) -> float:
        """The larger side: <= 0 inside, else how far outside (what the database keeps)."""
        return max(self.sides(lo_s, hi_s, actual_s))

    def add(self, lo_s: float, hi_s: float | None, actual_s: float) -> None:
        early, late = self.sides(lo_s, hi_s, actual_s)
        self._early.append(early)
        self._late.append(late)
        self._margins = None

    def shown(self, job_id: str, made_at: float, lo_s: float, hi_s: float | None) -> None:
        """Remember a raw interval shown for ``job_id`` and how it was widened; a long wait
        keeps every other one (at most ``per_job``), so one job cannot outweigh many."""
        kept = self._open.setdefault(job_id, [])
        kept.append(Shown(made_at, lo_s, hi_s, self.margins()))
        if len(kept) > self.per_job:
            self._open[job_id] = kept[::2]

    def settle(self, intervals: Sequence[Shown], started_at: float) -> int:
        """Score one started job's intervals, then take one ACI step on the share of those
        shown widened that missed as shown. Returns scores added."""
        missed = []
        for s in intervals:
            early, late = self.sides(s.lo_s, s.hi_s, started_at - s.made_at)
            self.add(s.lo_s, s.hi_s, started_at - s.made_at)
            self._unsaved.append(max(early, late))
            if s.margins is not None:
                missed.append(early > s.margins[0] or late > s.margins[1])
        if missed and self.step:
            target = 1.0 - self.coverage
            # clipped: past 0 every interval is already the widest seen, past 1 the raw one
            self.alpha = min(1.0, max(0.0, self.alpha + self.step * (
                target - sum(missed) / len(missed))))
            self._margins = None
        return len(intervals)

    def observe(self, snapshot: Snapshot) -> int:
        """Settle the intervals of jobs that started by ``snapshot`` (their start is known now);
        forget those of jobs gone without starting (cancelled). Returns scores added."""
        added = 0
        pending = {j.job_id for j in snapshot.pending}
        for job_id in list(self._open):
            run = snapshot.running.get(job_id)
            if run is not None:
                added += self.settle(self._open.pop(job_id), run.start_time)
            elif job_id not in pending:
                del self._open[job_id]
        return added

    def load(self, scores: Iterable[float]) -> int:
        """Scores kept from an earlier run of the daemon, oldest first; returns how many. Each
        is the larger side, so it stands for both."""
        n = 0
        for score in scores:
            if math.isfinite(score):
                self._early.append(score)
                self._late.append(score)
                n += 1
        self._margins = None
        return n

    def drain_new(self) -> list[float]:
        """The scores settled since the last call, to be stored."""
        out, self._unsaved = self._unsaved, []
        return out

    # -- using ------------------------------------------------------------------------------
    @property
    def scores(self) -> int:
        return len(self._early)

    def margins(self) -> tuple[float, float] | None:
        """``(q_early, q_late)`` in log time (>= 0), or None while fewer than ``min_scores``
        starts were seen."""
        n = len(self._early)
        if n < self.min_scores:
            return None
        if self._margins is None:
            k = max(1, min(n, math.ceil((n + 1) * (1.0 - self.alpha / 2))))
            self._margins = (max(0.0, sorted(self._early)[k - 1]),
                             max(0.0, sorted(self._late)[k - 1]))
        return self._margins

    def margin(self) -> float | None:
        """The larger side's margin (None before calibration)."""
        m = self.margins()
        return None if m is None else max(m)

    def widen(self, lo_s: float, hi_s: float | None) -> tuple[float, float | None]:
        m = self.margins()
        if m is None:
            return lo_s, hi_s
        lo = lo_s if not m[0] else max(0.0, (lo_s + self.c) * math.exp(-m[0]) - self.c)
        hi = hi_s if hi_s is None or not m[1] else (hi_s + self.c) * math.exp(m[1]) - self.c
        return lo, hi

    def describe(self) -> dict[str, float | int | None]:
        m = self.margins()
        return {"calibrated_on": self.scores, "target_coverage": self.coverage,
                "aimed_coverage": round(1.0 - self.alpha, 3),
                "widened_by": None if m is None else round(math.exp(max(m)), 2),
                "earlier_by": None if m is None else round(math.exp(m[0]), 2),
                "later_by": None if m is None else round(math.exp(m[1]), 2)}


@dataclass(frozen=True)
class Coverage:
    """Shares of actual starts inside the interval: raw, as shown (calibrated where enough
    starts were known), and among the intervals that were calibrated; the median width (s) of
    those, raw and as shown (bounded ones)."""

    intervals: int
    raw: float | None
    shown: float | None
    calibrated: int  # intervals made after ``min_scores`` starts were known
    once_calibrated: float | None
    raw_width_s: float | None = None
    shown_width_s: float | None = None


def online_coverage(intervals: Iterable[tuple[float, float, float | None, float]],
                    calibration: IntervalCalibration) -> Coverage:
    """Coverage as a daemon would have shown the intervals: each ``(made_at, lo_s, hi_s,
    actual_s)`` is widened by the starts known by its ``made_at`` only. The intervals that
    start at one time settle together (one ACI step), as one job's do in the daemon."""
    # by time only: two intervals made at once may tie on lo and have hi None (beyond horizon)
    rows = sorted(intervals, key=lambda r: (r[0], r[3], r[1]))
    by_start: dict[float, list[Shown]] = {}
    raw_in = shown_in = 0
    inside_calibrated: list[bool] = []
    widths: list[tuple[float, float]] = []
    for made, lo, hi, actual in rows:
        for start in sorted(t for t in by_start if t <= made):
            calibration.settle(by_start.pop(start), start)
        raw_in += lo <= actual <= (math.inf if hi is None else hi)
        margins = calibration.margins()
        wlo, whi = calibration.widen(lo, hi)
        inside = wlo <= actual <= (math.inf if whi is None else whi)
        shown_in += inside
        by_start.setdefault(made + actual, []).append(Shown(made, lo, hi, margins))
        if margins is not None:
            inside_calibrated.append(inside)
            if hi is not None and whi is not None:
                widths.append((hi - lo, whi - wlo))
    n, k = len(rows), len(inside_calibrated)
    return Coverage(n, raw_in / n if n else None, shown_in / n if n else None, k,
                    sum(inside_calibrated) / k if k else None,
                    median(w[0] for w in widths) if widths else None,
                    median(w[1] for w in widths) if widths else None)


__all__ = ["Coverage", "IntervalCalibration", "Shown", "online_coverage"]
