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
α_side)) / n`` empirical quantiles of the newest ``n`` early and late scores. The misses are
lopsided (estimates from time limits alone start jobs too late, so nearly every miss is early):
one symmetric score widened the side that never missed as much as the other, 4x wider intervals
for the same coverage on the limits-only estimate.

**The miss budget is shared between the sides.** Each side gets ``α/2``, but intervals are only
widened, never narrowed (an interval too wide is honest, one too narrow is not): a side whose
raw ends already miss less than ``α/2`` keeps margin 0 and misses only what it misses, so
without sharing the total aimed at was below ``α`` (with history or progress the raw lower ends
miss only 5-9 % on the synthetic traces). That side's unused share goes to the other side.

Under exchangeable errors that covers ``1 - α`` = 80 % of future starts. The errors are not
exchangeable over a trace: as the queue grows the newest scores under-state the next misses (on
Philly limits-only intervals held 66 %, not 80 %), and as it drains they over-state them.
So ``α`` itself is learnt online, adaptive conformal inference (Gibbs and Candès, NeurIPS 2021):
``α += step · (target α - missed)`` for each shown interval once its outcome is known. Per
interval, because the coverage promised is per interval shown (stepping once per started job
let the many intervals of long waits, which miss most, count as one and aimed the level the
wrong way on a growing queue). And as soon as it is known: a start before the shown lower end
or inside is known when the job starts, a miss above as soon as the shown upper end has passed
with the job still waiting (waiting for the start delayed exactly the misses of long waits, so
the level learnt from the quick starts only).

Intervals are not widened at all before ``min_scores`` starts were seen. Scores always use the
raw interval, so widening never feeds on itself. Inputs that are not finite or negative (a
clock gone wrong, a corrupt row) are logged with the job and skipped, never scored. The daemon
stores each interval's larger score (``estimate_history.save_scores``); a restarted daemon reads
them back as both sides (at least as wide as the two-sided scores they stand for) and starts
``α`` from the target again.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median

from railgang.daemon.core.model.snapshot import Snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shown:
    """One interval shown for a waiting job, in seconds from ``made_at`` (hi None: unbounded),
    with the widening it was shown with (None: shown raw, before calibration) and the group
    it was calibrated in ("": all intervals together)."""

    made_at: float
    lo_s: float
    hi_s: float | None
    margins: tuple[float, float] | None = None
    job_id: str = ""
    group: str = ""


def _bad(*values: float | None) -> bool:
    """Not a time: NaN, infinite or negative (None, an unbounded end, is fine)."""
    return any(v is not None and not (math.isfinite(v) and v >= 0.0) for v in values)


class _Level:
    """The newest scores of one group, the miss rate it aims at now (ACI's α_t), and the
    margins they call for (cached until either changes)."""

    def __init__(self, keep: int, alpha: float) -> None:
        self.early: deque[float] = deque(maxlen=keep)
        self.late: deque[float] = deque(maxlen=keep)
        self.alpha = alpha
        self.cached: tuple[float, float] | None = None

    def add(self, early: float, late: float) -> None:
        self.early.append(early)
        self.late.append(late)
        self.cached = None

    def learn(self, missed: bool, target: float, step: float) -> None:
        # clipped: past 0 every interval is already the widest seen, past 1 the raw one
        self.alpha = min(1.0, max(0.0, self.alpha + step * (target - missed)))
        self.cached = None

    def levels(self) -> tuple[float | None, float | None]:
        n, half = len(self.early), self.alpha / 2
        raw_early = sum(x > 0.0 for x in self.early) / n if n else 0.0
        raw_late = sum(x > 0.0 for x in self.late) / n if n else 0.0
        if raw_early < half:
            return None, self.alpha - raw_early
        if raw_late < half:
            return self.alpha - raw_late, None
        return half, half

    def margins(self) -> tuple[float, float]:
        if self.cached is None:
            n, out = len(self.early), []
            for scores, level in zip((self.early, self.late), self.levels(), strict=True):
                if level is None:
                    out.append(0.0)
                    continue
                k = max(1, min(n, math.ceil((n + 1) * (1.0 - level))))
                out.append(max(0.0, sorted(scores)[k - 1]))
            self.cached = (out[0], out[1])
        return self.cached


class IntervalCalibration:
    """Scores of settled intervals and the widening they call for; see the module docstring.

    Optionally per group (Mondrian conformal prediction, Vovk et al.): intervals shown with a
    ``group`` (the daemon's: ``simulated``, ``profile``) are widened by that group's own scores
    and level once it has ``min_scores``, and by all scores together until then. Estimates the
    simulation reached and estimates placed on the GPU-count profile miss by very different
    amounts (hours against days at a 500-job queue): one pool widened the first by the misses
    of the second."""

    def __init__(self, *, coverage: float = 0.8, keep: int = 1000, min_scores: int = 20,
                 quantum_s: float = 60.0, per_job: int = 24, step: float = 0.01) -> None:
        if not 0.0 < coverage < 1.0:
            raise ValueError(f"coverage must be in (0, 1), not {coverage}")
        self.coverage, self.min_scores, self.c = coverage, max(1, min_scores), max(1.0, quantum_s)
        self.per_job = max(1, per_job)
        self.keep = max(1, keep)
        self.step = max(0.0, step)  # the ACI step γ, per interval: how fast the level follows
        self._pool = _Level(self.keep, 1.0 - coverage)  # every score, every group
        self._groups: dict[str, _Level] = {}
        self._open: dict[str, list[Shown]] = {}  # job -> intervals shown while it waited
        self._due: dict[str, float] = {}  # job -> earliest shown upper end not yet passed
        self._counted: set[Shown] = set()  # open intervals already counted as missed above
        self._unsaved: list[float] = []  # settled since the last drain_new (for the database)

    @property
    def alpha(self) -> float:
        """The miss rate aimed at now, all groups together."""
        return self._pool.alpha

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

    def _group(self, group: str) -> _Level:
        level = self._groups.get(group)
        if level is None:
            level = self._groups[group] = _Level(self.keep, 1.0 - self.coverage)
        return level

    def add(self, lo_s: float, hi_s: float | None, actual_s: float, job_id: str = "",
            group: str = "") -> bool:
        """Score one settled interval; False (logged, not scored) for a time that is not one."""
        if _bad(lo_s, hi_s, actual_s):
            log.warning("start-time calibration: job %s: interval (%r, %r) started after %r s "
                        "is not a time; not scored", job_id or "?", lo_s, hi_s, actual_s)
            return False
        early, late = self.sides(lo_s, hi_s, actual_s)
        self._pool.add(early, late)
        if group:
            self._group(group).add(early, late)
        self._unsaved.append(max(early, late))
        return True

    def shown(self, job_id: str, made_at: float, lo_s: float, hi_s: float | None,
              group: str = "") -> None:
        """Remember a raw interval shown for ``job_id`` and how it was widened; a long wait
        keeps every other one (at most ``per_job``), so one job cannot outweigh many."""
        if _bad(made_at, lo_s, hi_s) or (hi_s is not None and hi_s < lo_s):
            log.warning("start-time calibration: job %s: interval (%r, %r) made at %r is not "
                        "one; not kept", job_id, lo_s, hi_s, made_at)
            return
        s = Shown(made_at, lo_s, hi_s, self.margins(group), job_id, group)
        kept = self._open.setdefault(job_id, [])
        kept.append(s)
        if len(kept) > self.per_job:
            self._open[job_id] = kept = kept[::2]
            self._counted.intersection_update(kept)
        due = self._deadline(s)
        if due < self._due.get(job_id, math.inf):
            self._due[job_id] = due

    def _deadline(self, s: Shown) -> float:
        """When the shown upper end passes (inf: unbounded, or shown raw)."""
        if s.hi_s is None or s.margins is None:
            return math.inf
        return s.made_at + (s.hi_s + self.c) * math.exp(s.margins[1]) - self.c

    def _learn(self, missed: bool, group: str) -> None:
        """One ACI step, for all intervals and for the interval's group: the level moves
        toward what the shown intervals missed."""
        if self.step:
            target = 1.0 - self.coverage
            self._pool.learn(missed, target, self.step)
            if group:
                self._group(group).learn(missed, target, self.step)

    def settle(self, intervals: Sequence[Shown], started_at: float) -> int:
        """Score one started job's intervals and take an ACI step for each shown widened
        whose outcome was not known before (see ``overdue``). Returns scores added."""
        if _bad(started_at):
            log.warning("start-time calibration: job %s started at %r, not a time; its "
                        "intervals are not scored", intervals[0].job_id if intervals else "?",
                        started_at)
            return 0
        added = 0
        for s in intervals:
            actual = started_at - s.made_at
            if -self.c < actual < 0.0:
                actual = 0.0  # started within a quantum of when it was shown: clocks
            if not self.add(s.lo_s, s.hi_s, actual, s.job_id, s.group):
                continue
            added += 1
            if s.margins is not None and s not in self._counted:
                early, late = self.sides(s.lo_s, s.hi_s, actual)
                self._learn(early > s.margins[0] or late > s.margins[1], s.group)
            self._counted.discard(s)
        return added

    def overdue(self, now: float) -> int:
        """Count as missed every interval still open whose shown upper end passed before
        ``now`` (its job is still waiting: a miss above, known before the job starts); one ACI
        step each, once. Returns how many."""
        missed = 0
        for job_id in [j for j, due in self._due.items() if due < now]:
            nxt = math.inf
            for s in self._open.get(job_id, ()):
                if s in self._counted:
                    continue
                due = self._deadline(s)
                if due < now:
                    self._counted.add(s)
                    self._learn(True, s.group)
                    missed += 1
                else:
                    nxt = min(nxt, due)
            if nxt < math.inf:
                self._due[job_id] = nxt
            else:
                del self._due[job_id]
        return missed

    def started(self, job_id: str, started_at: float) -> int:
        """``job_id`` started at ``started_at``: settle what was shown for it."""
        self._due.pop(job_id, None)
        return self.settle(self._open.pop(job_id, []), started_at)

    def forget(self, job_id: str) -> None:
        """``job_id`` left the queue without starting (cancelled): nothing to score."""
        self._due.pop(job_id, None)
        self._counted.difference_update(self._open.pop(job_id, []))

    def observe(self, snapshot: Snapshot) -> int:
        """Settle the intervals of jobs that started by ``snapshot`` (their start is known now),
        forget those of jobs gone without starting (cancelled), then count the misses above
        that are known already. Returns scores added."""
        added = 0
        pending = {j.job_id for j in snapshot.pending}
        for job_id in list(self._open):
            run = snapshot.running.get(job_id)
            if run is not None:
                added += self.started(job_id, run.start_time)
            elif job_id not in pending:
                self.forget(job_id)
        self.overdue(snapshot.now)
        return added

    def load(self, scores: Iterable[float]) -> int:
        """Scores kept from an earlier run of the daemon, oldest first, into the pool of all
        groups; returns how many. Each is the larger side, so it stands for both."""
        n = 0
        for score in scores:
            if math.isfinite(score):
                self._pool.add(score, score)
                n += 1
        return n

    def drain_new(self) -> list[float]:
        """The scores settled since the last call, to be stored."""
        out, self._unsaved = self._unsaved, []
        return out

    # -- using ------------------------------------------------------------------------------
    @property
    def scores(self) -> int:
        return len(self._pool.early)

    def _level(self, group: str) -> _Level | None:
        """The scores that calibrate ``group``: its own once it has enough, else all."""
        own = self._groups.get(group) if group else None
        if own is not None and len(own.early) >= self.min_scores:
            return own
        return self._pool if len(self._pool.early) >= self.min_scores else None

    def levels(self, group: str = "") -> tuple[float | None, float | None]:
        """The miss rate each side aims at: ``α/2`` each, but a side whose raw ends miss less
        is left as it is (None: never narrowed) and its unused share goes to the other."""
        own = self._groups.get(group) if group else None
        return (own or self._pool).levels()

    def margins(self, group: str = "") -> tuple[float, float] | None:
        """``(q_early, q_late)`` in log time (>= 0), or None while fewer than ``min_scores``
        starts were seen."""
        level = self._level(group)
        return None if level is None else level.margins()

    def margin(self, group: str = "") -> float | None:
        """The larger side's margin (None before calibration)."""
        m = self.margins(group)
        return None if m is None else max(m)

    def widen(self, lo_s: float, hi_s: float | None,
              group: str = "") -> tuple[float, float | None]:
        m = self.margins(group)
        if m is None:
            return lo_s, hi_s
        lo = lo_s if not m[0] else max(0.0, (lo_s + self.c) * math.exp(-m[0]) - self.c)
        hi = hi_s if hi_s is None or not m[1] else (hi_s + self.c) * math.exp(m[1]) - self.c
        return lo, (hi if hi is None or math.isfinite(hi) else None)

    def describe(self, group: str = "") -> dict[str, float | int | str | None]:
        m, level = self.margins(group), self._level(group)
        own = level is not None and level is not self._pool
        return {"calibrated_on": len(level.early) if level is not None else self.scores,
                "group": group if own else "all", "target_coverage": self.coverage,
                "aimed_coverage": round(1.0 - (level or self._pool).alpha, 3),
                "widened_by": None if m is None else round(math.exp(max(m)), 2),
                "earlier_by": None if m is None else round(math.exp(m[0]), 2),
                "later_by": None if m is None else round(math.exp(m[1]), 2)}


@dataclass(frozen=True)
class Outcome:
    """One interval as shown: inside or not (None: shown raw, before calibration), and its
    width raw and as shown (None: unbounded)."""

    raw_inside: bool
    inside: bool
    calibrated: bool
    raw_width_s: float | None
    shown_width_s: float | None


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

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> Coverage:
        n = len(outcomes)
        cal = [o for o in outcomes if o.calibrated]
        widths = [(o.raw_width_s, o.shown_width_s) for o in cal
                  if o.raw_width_s is not None and o.shown_width_s is not None]
        return cls(n, sum(o.raw_inside for o in outcomes) / n if n else None,
                   sum(o.inside for o in outcomes) / n if n else None, len(cal),
                   sum(o.inside for o in cal) / len(cal) if cal else None,
                   median(w[0] for w in widths) if widths else None,
                   median(w[1] for w in widths) if widths else None)


Row = (tuple[float, float, float | None, float] | tuple[float, float, float | None, float, str]
       | tuple[float, float, float | None, float, str, str])


def replay(rows: Iterable[Row], calibration: IntervalCalibration) -> list[Outcome]:
    """Each interval ``(made_at, lo_s, hi_s, actual_s[, job_id[, group]])`` as a daemon would
    have shown it, in input order: widened by what was known at its ``made_at`` only, through
    the daemon's own calls (``shown``, ``started``, ``overdue``). Without a job id each row is
    its own job."""
    given = list(rows)
    order = sorted(range(len(given)), key=lambda i: (given[i][0], given[i][3], given[i][1]))
    starts: dict[str, float] = {}  # open job -> when it starts
    out: dict[int, Outcome] = {}
    for i in order:
        made, lo, hi, actual = given[i][:4]
        job = str(given[i][4]) if len(given[i]) > 4 else f"#{i}"  # type: ignore[misc]
        group = str(given[i][5]) if len(given[i]) > 5 else ""  # type: ignore[misc]
        for j, t in sorted(((j, t) for j, t in starts.items() if t <= made),
                           key=lambda x: (x[1], x[0])):
            calibration.started(j, t)
            del starts[j]
        calibration.overdue(made)
        m = calibration.margins(group)
        wlo, whi = calibration.widen(lo, hi, group)
        top = math.inf if hi is None else hi
        out[i] = Outcome(lo <= actual <= top, wlo <= actual <= (math.inf if whi is None else whi),
                         m is not None, None if hi is None else hi - lo,
                         None if whi is None else whi - wlo)
        calibration.shown(job, made, lo, hi, group)
        if math.isfinite(actual) and actual >= 0.0:  # else never settled (not a time)
            starts[job] = made + actual
    return [out[i] for i in range(len(given))]


def online_coverage(rows: Iterable[Row], calibration: IntervalCalibration) -> Coverage:
    """Coverage as a daemon would have shown the intervals (``replay``)."""
    return Coverage.of(replay(rows, calibration))


__all__ = ["Coverage", "IntervalCalibration", "Outcome", "Shown", "online_coverage", "replay"]
