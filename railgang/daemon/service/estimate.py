"""When will a waiting job start: a short forward simulation of the live queue.

The daemon's snapshot (running jobs on their exact GPUs, the queue in order, accounts, quota
tree, node states) seeds the simulator's backend (``sim.seed.load``) and the simulator's engine
replays it forward (``engine.replay_from``) through the same decision core and the production
policy, with no arrivals. What is unknown is how long each job runs; every job gets a run time
from the best source there is, named in the result:

1. ``progress`` — the job's state carries the work left (``work_remaining_s``: the simulator
   knows it; the Slurm CLI backend sets it from the training helper's progress Comment when it
   gives the total steps and the step time),
2. ``history`` — its time limit × an actual/requested run-time ratio observed for its account
   (else its priority class, else the fleet) by :class:`RatioHistory`, seeded at daemon start
   from the ledger's finished jobs (``estimate_history.py``); a running job draws only
   from ratios it has not already outlived, and runs to its limit if it outlived them all,
3. ``time_limit`` — its time limit alone (Slurm ends the job there: an upper bound),
4. ``unknown`` — neither: it is taken to run past the horizon.

One simulation uses the median of each job's candidates (the point estimate); ``samples`` more
draw run times at random from the same candidates, and the spread of the job's start over all
simulations is the interval (p10-p90, nearest rank). Every simulation is bounded: a horizon, a
number of events and a share of one wall-clock budget; it stops as soon as every target job has
started. When the events or wall-clock budget runs out first, the jobs the simulation did not
reach are placed on a GPU-count profile from where it stopped (``estimate_profile.py``: queue
order, backfill, topology ignored; their estimate says so). A job that still does not start in
a simulation is censored there, and the result says why honestly: ``never`` (larger than the
cluster), ``beyond_horizon`` (it still waits at the horizon, or nothing left to happen would
start it), or ``budget`` (with ``profile`` off: in the median simulation it had not started by
``not_before_s``, a lower bound only as good as the simulated run times).

The estimate ignores future arrivals (a later higher-class job can still overtake) and GPUs held
by jobs the snapshot does not show stay held for the whole simulation. docs/estimate.md has the
measured error on replayed traces.
"""

from __future__ import annotations

import functools
import math
import random
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from railgang.daemon.config import DaemonSettings
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.gang import Placer, topology_placer
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.plan import Policy
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies import registry
from railgang.daemon.service.estimate_calibration import IntervalCalibration
from railgang.daemon.service.estimate_profile import profile_starts
from railgang.daemon.sim import seed as seeding
from railgang.daemon.sim.backend import SimBackend, SimConfig
from railgang.daemon.sim.engine import Bounds, EngineConfig, replay_from
from railgang.daemon.sim.metrics import JobRecord
from railgang.daemon.when import ago, from_now, span

if TYPE_CHECKING:
    from railgang.daemon.cycle_settings import CycleSetup

SOURCES = ("progress", "history", "time_limit", "unknown")
MIN_RUN_S = 1.0  # a job that outlived its estimate is taken to end within the second


@dataclass(frozen=True)
class EstimateConfig:
    samples: int = 8  # random draws beyond the median one (the interval comes from all of them)
    horizon_s: float = 7 * 86400.0  # a job not started this long after now: "beyond_horizon"
    max_events: int = 20000  # events per simulation
    wall_s: float = 1.0  # wall-clock seconds for all simulations together
    cycle_s: float = 60.0  # the simulated daemon's cycle quantum near now ...
    cycle_growth: float = 0.05  # ... growing to 5 % of the time simulated (a start 10 h out is
    # placed on a 30 min grid): bounded relative error for far fewer cycles
    median_share: float = 0.5  # of the wall budget for the median draw (the point estimate)
    seed: int = 0
    # place the jobs a budget-stopped simulation did not reach on a GPU-count profile
    # (estimate_profile.py) instead of answering "not before"
    profile: bool = True
    # the profile's order: "policy" (the order the cycle would try the queue in now: classes
    # first, the policy's own order inside each) or "queue" (the snapshot's, by submit time)
    profile_order: str = "policy"


class RatioHistory:
    """Observed actual/requested run-time ratios (run time / time limit) of finished jobs, per
    account and per priority class, the newest ``keep`` of each; a scope is used once it holds
    ``min_samples`` ratios. :meth:`observe` learns them from consecutive snapshots."""

    def __init__(self, *, keep: int = 500, min_samples: int = 5) -> None:
        self.keep, self.min_samples = keep, min_samples
        self._by: dict[tuple[str, Any], deque[float]] = {}
        self._seen: dict[str, tuple[str, int, float, float]] = {}  # running: account, class, start, limit
        self._last_now: float | None = None

    def add(self, account: str, priority_class: int | None, ratio: float) -> None:
        """One finished job's ratio; ``priority_class`` None (the ledger does not know the class) leaves
        the class scope out."""
        if not 0 < ratio < math.inf:
            return
        ratio = min(ratio, 1.0)  # Slurm ends a job at its limit (a late completion is rounding)
        for key in (("account", account), ("class", priority_class), ("all", "")):
            if key[1] is not None:
                self._by.setdefault(key, deque(maxlen=self.keep)).append(ratio)

    def ratios(self, account: str, priority_class: int) -> tuple[Sequence[float], str]:
        """The ratios of the narrowest scope with enough of them, and that scope's name."""
        for scope, key in (("account", account), ("class", priority_class), ("all", "")):
            found = self._by.get((scope, key))
            if found is not None and len(found) >= self.min_samples:
                return found, scope
        return (), ""

    def observe(self, snapshot: Snapshot) -> int:
        """Learn from the jobs that left the running set since the previous snapshot without
        going back to the queue (finished, not preempted); they ended between the two
        observations. Returns how many ratios were added."""
        now, added = snapshot.now, 0
        pending = {j.job_id for j in snapshot.pending}
        if self._last_now is not None:
            ended = (self._last_now + now) / 2
            for job_id, (account, priority_class, start, limit) in self._seen.items():
                if job_id not in snapshot.running and job_id not in pending:
                    self.add(account, priority_class, (ended - start) / limit)
                    added += 1
        self._seen = {j: (r.job.account, r.priority_class, r.start_time, r.job.time_limit_s)
                      for j, r in snapshot.running.items() if r.job.time_limit_s}
        self._last_now = now
        return added


Draw = Callable[[Sequence[float]], float]


def _median(values: Sequence[float]) -> float:
    return float(statistics.median_low(values))


def run_time(job: Job, elapsed: float, history: RatioHistory, draw: Draw,
             *, left: float | None = None) -> tuple[float | None, str]:
    """Seconds ``job`` still runs from now, and the source (see the module docstring); ``None``
    when unknown. ``elapsed``: how long the current run has lasted (0 while pending); ``left``:
    a running job's time to finish at its current size, as its view answers for now."""
    if left is not None or job.work_remaining_s is not None:
        if left is None:
            left = job.work_remaining_s
        return max(MIN_RUN_S, left if left is not None else MIN_RUN_S), "progress"
    limit = job.time_limit_s
    if not limit:
        return None, "unknown"
    to_limit = max(MIN_RUN_S, limit - elapsed)
    ratios, _ = history.ratios(job.account, job.priority_class)
    if not ratios:
        return to_limit, "time_limit"
    alive = [r * limit - elapsed for r in ratios if r * limit > elapsed]
    return (max(MIN_RUN_S, draw(alive)) if alive else to_limit), "history"


def _quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of sorted ``values`` (``inf`` for a censored draw)."""
    return values[max(0, math.ceil(q * len(values)) - 1)]


@dataclass(frozen=True)
class StartEstimate:
    """One waiting job's estimate; times are seconds from the snapshot's ``now``."""

    job_id: str
    status: str  # estimated | beyond_horizon | budget | never
    start_s: float | None = None  # median over the simulations
    p10_s: float | None = None
    p90_s: float | None = None  # None: beyond the horizon or the budget in over 10 % of them
    not_before_s: float | None = None  # censored: not started by then in the median draw
    started_in: int = 0  # simulations in which it started
    note: str = ""
    profiled: bool = False  # placed on the GPU-count profile past the simulation's budget

    def as_dict(self, now: float) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "started_in": self.started_in}
        for name in ("start_s", "p10_s", "p90_s", "not_before_s"):
            value = getattr(self, name)
            out[name] = None if value is None else round(value, 1)
        out["start_at"] = None if self.start_s is None else round(now + self.start_s, 1)
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Estimates:
    """What one estimation run found, for every target job."""

    now: float
    policy: str
    jobs: Mapping[str, StartEstimate]
    sources: Mapping[str, int]  # running jobs by where their remaining time came from
    queued_sources: Mapping[str, int]  # queued jobs by where their run time came from
    simulations: int
    stopped: Mapping[str, int]  # why simulations stopped (done, horizon, events, wall, drained)
    horizon_s: float
    wall_ms: float
    history_scope: Mapping[str, int] = field(default_factory=dict)  # pending jobs by ratio scope
    cycles: int = 0  # simulated decision cycles, all simulations together

    def for_job(self, job_id: str) -> dict[str, Any] | None:
        """The JSON ``explain`` and the API show under ``estimate``."""
        est = self.jobs.get(job_id)
        if est is None:
            return None
        return {**est.as_dict(self.now), "as_of": round(self.now, 1), "policy": self.policy,
                "simulations": self.simulations, "horizon_s": self.horizon_s,
                "remaining_from": {k: v for k, v in self.sources.items() if v},
                "run_time_from": {k: v for k, v in self.queued_sources.items() if v},
                "wall_ms": round(self.wall_ms, 1)}


def _run_times(snapshot: Snapshot, history: RatioHistory, draw: Draw, unknown_s: float,
               ) -> tuple[dict[str, float], Counter[str], Counter[str]]:
    """Run time of every job from now (running: what is left), and the sources used for the
    running and for the queued jobs."""
    now, out, sources, queued = snapshot.now, {}, Counter[str](), Counter[str]()
    for job_id, run in snapshot.running.items():
        left, src = run_time(run.job, max(0.0, now - run.start_time), history, draw,
                             left=run.remaining_at(now))
        left = unknown_s if left is None else left
        out[job_id] = _until_deadline(run, now, left)
        sources[src] += 1
    for job in snapshot.pending:
        total, src = run_time(job, 0.0, history, draw)
        out[job.job_id] = unknown_s if total is None else total
        queued[src] += 1
    return out, sources, queued


def _until_deadline(run: RunningJob, now: float, left: float) -> float:
    """A signalled job gives its GPUs back at its preemption deadline at the latest (a shrink's
    notice does not end the job: it runs on, smaller)."""
    if run.preempt_deadline is None or run.shrink_to is not None:
        return left
    return min(left, max(MIN_RUN_S, run.preempt_deadline - now))


def _point(rec: JobRecord, now: float, placed: float | None, reached: float,
           why: str) -> tuple[float | None, float, str]:
    """The median draw's answer for one job: its start (simulated, else from the profile), how
    far that run reached, and why it stopped (``PROFILE`` when only the profile placed it)."""
    at = rec.start - now if rec.start is not None else placed
    return at, reached, PROFILE if rec.start is None and at is not None else why


def estimate_starts(snapshot: Snapshot, policy: Policy, *, history: RatioHistory | None = None,
                    config: EstimateConfig = EstimateConfig(), cycle: CycleConfig | None = None,
                    placer: Placer = topology_placer, targets: Iterable[str] | None = None,
                    fresh: Callable[[], Policy] | None = None) -> Estimates:
    """Estimate when each target (default: every pending job) starts; see the module docstring.

    ``policy`` must be an instance the caller does not otherwise use (policies may keep state
    between cycles); ``cycle`` is the daemon's cycle configuration; ``fresh`` makes another
    instance like ``policy`` for the profile's order (default: the registry's, without parameters).
    """
    began = time.perf_counter()
    deadline = began + config.wall_s
    history = history or RatioHistory()
    now = snapshot.now
    pending_ids = {j.job_id for j in snapshot.pending}
    chosen = pending_ids if targets is None else set(targets) & pending_ids
    wanted = [j.job_id for j in snapshot.pending if j.job_id in chosen]  # queue order
    unknown_s = 10 * config.horizon_s  # runs past the horizon
    starts: dict[str, list[float]] = {j: [] for j in wanted}
    censored: dict[str, list[tuple[float, str]]] = {j: [] for j in wanted}
    rejected: dict[str, str] = {}
    point: dict[str, tuple[float | None, float, str]] = {}  # the median draw: start, reached, why
    stopped: Counter[str] = Counter()
    sources, queued = Counter[str](), Counter[str]()  # of the median draw
    rng = random.Random(config.seed)
    runs = 1 + max(0, config.samples)
    done_runs = cycles = 0
    rank = functools.cache(lambda: _policy_rank(snapshot, policy, config.profile_order, fresh))
    engine = EngineConfig(sim=SimConfig(oracle=False, quotas=snapshot.quotas),
                          cycle_s=config.cycle_s, cycle_growth=config.cycle_growth, cycle=cycle,
                          seed=config.seed)
    for i in range(runs):
        left_s = deadline - time.perf_counter()
        if i > 0 and left_s <= 0:
            break
        draw: Draw = _median if i == 0 else (lambda values: rng.choice(values))
        run_s, srcs, queued_srcs = _run_times(snapshot, history, draw, unknown_s)
        if i == 0:
            sources, queued = srcs, queued_srcs
        records: dict[str, JobRecord] = {}

        def seed(backend: SimBackend, run_s: Mapping[str, float] = run_s,
                 records: dict[str, JobRecord] = records) -> None:
            records.update(seeding.load(backend, snapshot, run_s))

        def done(_: SimBackend, records: dict[str, JobRecord] = records) -> bool:
            # queue order: the first job still waiting ends the scan (usually at once)
            return all(records[j].start is not None or records[j].rejected for j in wanted)

        share = (config.median_share if i == 0 and runs > 1 else 1.0 / (runs - i))
        bounds = Bounds(until=now + config.horizon_s, max_events=config.max_events,
                        wall_s=max(0.0, left_s) * share, done=done)
        result = replay_from(seed, now, policy, snapshot.fabric, bounds=bounds, config=engine,
                             placer=placer)
        why = result.stopped or "drained"
        stopped[why] += 1
        cycles += result.cycles
        reached = (result.ended_at if result.ended_at is not None else now) - now
        profiled = (_profile(snapshot, records, run_s, reached, config.horizon_s, rank())
                    if config.profile and why in ("events", "wall") else {})
        for job_id in wanted:
            rec = records[job_id]
            if rec.start is not None:
                starts[job_id].append(rec.start - now)
            elif rec.rejected:
                rejected[job_id] = rec.rejected
            elif (placed := profiled.get(job_id)) is not None:
                starts[job_id].append(placed)
            else:
                censored[job_id].append((reached, why))
            if i == 0:
                point[job_id] = _point(rec, now, profiled.get(job_id), reached, why)
        done_runs += 1
    jobs = {j: _summarise(j, point[j], sorted(starts[j]), len(censored[j]), rejected.get(j),
                          config.horizon_s) for j in wanted}
    scopes = Counter(history.ratios(j.account, j.priority_class)[1] or "none"
                     for j in snapshot.pending if j.job_id in starts)
    return Estimates(now=now, policy=getattr(policy, "name", type(policy).__name__), jobs=jobs,
                     sources={s: sources.get(s, 0) for s in SOURCES},
                     queued_sources={s: queued.get(s, 0) for s in SOURCES}, simulations=done_runs,
                     stopped=dict(stopped), horizon_s=config.horizon_s,
                     wall_ms=(time.perf_counter() - began) * 1e3, history_scope=dict(scopes),
                     cycles=cycles)


PROFILE = "profile"  # a start from estimate_profile.py, past where the simulation stopped


def _policy_rank(snapshot: Snapshot, policy: Policy, order: str = "policy",
                 make: Callable[[], Policy] | None = None) -> dict[str, tuple[int, int]]:
    """Each waiting job's place in the order the cycle would try the queue in now: priority
    class first, the policy's own order inside it (one ``plan`` of a fresh instance: a policy
    may keep state). Empty (the snapshot's order) for ``order`` "queue" or a policy not in the
    registry. Called once per estimate, and only when a simulation stopped short."""
    if order != "policy":
        return {}
    try:
        fresh = make() if make is not None else registry.get(getattr(policy, "name", ""))
    except KeyError:
        return {}
    at = {w.job_id: i for i, w in enumerate(fresh.plan(snapshot, snapshot.now).order)}
    return {j.job_id: (int(j.priority_class), at.get(j.job_id, len(at))) for j in snapshot.pending}


def _profile(snapshot: Snapshot, records: Mapping[str, JobRecord], run_s: Mapping[str, float],
             reached: float, horizon_s: float,
             rank: Mapping[str, tuple[int, int]]) -> dict[str, float | None]:
    """Starts of the queued jobs a budget-stopped simulation did not reach, on a GPU-count
    profile (estimate_profile.py): what runs now until its estimated end, what the simulation
    started from its start, then the rest in ``rank``'s order (the snapshot's where it has
    none) from where it stopped."""
    now = snapshot.now
    running = sum(r.gpus for r in snapshot.running.values())
    capacity = min(snapshot.total_gpus, snapshot.free_gpus + running)
    held = [(0.0, run_s[j], r.gpus) for j, r in snapshot.running.items()]
    queue = []
    for job in snapshot.pending:
        rec = records[job.job_id]
        if rec.start is not None:
            held.append((rec.start - now, rec.start - now + run_s[job.job_id], rec.gpus))
        elif not rec.rejected:
            queue.append((job.job_id, job.min_gpus, run_s[job.job_id]))
    if rank:
        last = (len(rank), len(rank))
        queue.sort(key=lambda q: rank.get(q[0], last))  # stable: ties keep the snapshot's order
    return profile_starts(capacity, held, queue, after=reached, horizon=horizon_s)


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else value


def _summarise(job_id: str, point: tuple[float | None, float, str], started: list[float],
               censored: int, rejected: str | None, horizon_s: float) -> StartEstimate:
    """The median draw gives the estimate (or says why there is none); every draw, a censored
    one counted as later than all, gives the interval."""
    start, reached, why = point
    if rejected is not None and start is None:
        return StartEstimate(job_id, "never", note=rejected)
    values = started + [math.inf] * censored
    p10, p90 = _quantile(values, 0.1), _quantile(values, 0.9)
    if start is not None:
        note = ("placed past the simulation's budget on a GPU-count profile (topology and the "
                "policy's order not simulated)" if why == PROFILE else "")
        return StartEstimate(job_id, "estimated", start, min(p10, start), _finite(max(p90, start)),
                             started_in=len(started), note=note, profiled=why == PROFILE)
    if why in ("events", "wall"):
        return StartEstimate(job_id, "budget", p10_s=_finite(p10), not_before_s=reached,
                             started_in=len(started),
                             note="the simulation budget ran out before it started")
    if why == "drained":
        note = "nothing the snapshot shows ending would free room for it"
    else:
        note = f"not started within the {horizon_s / 3600:g} h horizon"
    return StartEstimate(job_id, "beyond_horizon", p10_s=_finite(p10), not_before_s=horizon_s,
                         started_in=len(started), note=note)


class StartEstimator:
    """The daemon's side: learns run-time ratios from every snapshot, estimates the whole queue
    again once ``interval_s`` has passed since the last estimate (one set of simulations serves
    every waiting job), and hands ``explain.build_rows`` the latest estimate per waiting job.

    Each estimate uses a fresh instance of the production policy ``policy_name``, so the
    daemon's own policy object never sees a simulated cycle.
    """

    def __init__(self, policy_name: str, *, cycle: CycleConfig | None = None,
                 config: EstimateConfig = EstimateConfig(), interval_s: float = 60.0,
                 placer: Placer = topology_placer, history: RatioHistory | None = None,
                 calibration: IntervalCalibration | None = None,
                 make_policy: Callable[[], Policy] | None = None) -> None:
        self.policy_name, self.cycle, self.config = policy_name, cycle, config
        # a fresh policy per estimate, with the daemon's parameters (CycleSetup.policy)
        self.make_policy = make_policy or (lambda: registry.get(policy_name))
        self.interval_s, self.placer = interval_s, placer
        self.history = history or RatioHistory()
        self.calibration = calibration or IntervalCalibration(quantum_s=config.cycle_s)
        self.cluster = ""  # whose scores the database keeps (estimate_history.save_scores)
        self.last: Estimates | None = None
        self.rows: dict[str, dict[str, Any]] = {}

    def refresh(self, snapshot: Snapshot) -> Mapping[str, dict[str, Any]]:
        """The estimate per waiting job (re-estimated when due); jobs that arrived since the
        last estimate have none until the next. Intervals are widened by how often earlier ones
        missed (estimate_calibration.py)."""
        self.history.observe(snapshot)
        self.calibration.observe(snapshot)
        if self.last is None or snapshot.now - self.last.now >= self.interval_s:
            self.last = estimate_starts(snapshot, self.make_policy(),
                                        history=self.history, config=self.config,
                                        cycle=self.cycle, placer=self.placer,
                                        fresh=self.make_policy)
            self.rows = {}
            for job_id, est in self.last.jobs.items():
                row = self.last.for_job(job_id)
                if row is None:
                    continue
                if est.status == "estimated" and est.p10_s is not None:
                    # calibrated apart: the profile's estimates miss by far more (Mondrian)
                    group = "profile" if est.profiled else "simulated"
                    self.calibration.shown(job_id, self.last.now, est.p10_s, est.p90_s, group)
                    row = self._calibrated(row, est, group)
                self.rows[job_id] = row
        return self.rows

    def _calibrated(self, row: dict[str, Any], est: StartEstimate,
                    group: str) -> dict[str, Any]:
        lo, hi = self.calibration.widen(est.p10_s or 0.0, est.p90_s, group)
        return {**row, "p10_s": round(lo, 1), "p90_s": None if hi is None else round(hi, 1),
                "raw_p10_s": row["p10_s"], "raw_p90_s": row["p90_s"],
                "interval": self.calibration.describe(group)}


def render_estimate(est: Mapping[str, Any]) -> str:
    """One line for ``railgang explain``: when, how sure, from what, and how old the answer is."""
    def counts(key: str) -> str:
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted((est.get(key) or {}).items()))

    basis = f"{est.get('simulations')} simulations of the {est.get('policy')} policy"
    if counts("remaining_from"):
        basis += f"; running jobs' remaining time from {counts('remaining_from')}"
    if counts("run_time_from"):
        basis += f"; queued jobs' run time from {counts('run_time_from')}"
    age = est.get("age_s")
    since = f", {ago(age)}" if age is not None else ""
    status = est.get("status")
    if status == "estimated":
        # the estimate counts from when it was made: start and bounds alike are shown from now
        made = age or 0.0
        p90 = est.get("p90_s")
        lo = from_now(est["p10_s"] - made)
        hi = span(p90 - made) if p90 is not None else "beyond the horizon"
        bounds = lo if p90 is not None and from_now(p90 - made) == lo else f"{lo} - {hi}"
        left = est["start_s"] - made
        when = from_now(left) if left >= 1 else "now (at the next cycles)"
        interval = est.get("interval") or {}
        how = "from the estimate"
        if est.get("note"):  # placed on the GPU-count profile past the simulation's budget
            how += f", {est['note']}"
        if interval.get("widened_by"):
            how += (f", widened x{interval['widened_by']:g} by {interval['calibrated_on']} past "
                    "starts")
            if interval.get("group") not in (None, "all"):
                how += f" of {interval['group']} estimates"
        return (f"  expected start: {when} (p10-p90 {bounds} {how}; "
                f"{basis}{since})")
    if status == "never":
        return f"  expected start: never: {est.get('note', '')} ({basis}{since})"
    lower = est.get("not_before_s")
    bound = f"not before {span(lower)}" if lower is not None else "unknown"
    return f"  expected start: {bound}: {est.get('note', '')} ({basis}{since})"


def start_estimator(daemon: DaemonSettings, setup: CycleSetup) -> StartEstimator | None:
    """The daemon's estimator from its settings (``daemon.estimate_*``); None when turned off.
    It simulates the cycle the daemon runs: ``setup`` is the daemon's own ``cycle_from``, so
    the policy's parameters (fair share, Tiresias' thresholds) are the daemon's too."""
    if daemon.estimate_interval_s <= 0:
        return None
    config = EstimateConfig(samples=daemon.estimate_samples, wall_s=daemon.estimate_wall_s,
                            horizon_s=daemon.estimate_horizon_h * 3600.0, seed=daemon.seed)
    return StartEstimator(setup.policy_name, cycle=setup.config, config=config,
                          interval_s=daemon.estimate_interval_s, make_policy=setup.policy)


__all__ = ["SOURCES", "EstimateConfig", "Estimates", "RatioHistory", "StartEstimate",
           "StartEstimator", "estimate_starts", "render_estimate", "run_time", "start_estimator"]
