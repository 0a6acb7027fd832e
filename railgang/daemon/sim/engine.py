"""The discrete-event engine: replay a trace through ``run_cycle`` on a ``SimBackend``.

Events live in one heap ordered by (time, kind, sequence): arrivals, completions and preemption
kills first, then at most one decision cycle per timestamp, so every event of an instant is seen
by the cycle that follows it. Time jumps from event to event; a cycle runs only when something
changed (an arrival, a completion, a kill) — coalesced per instant, or per ``cycle_s`` quantum if
one is set, like the daemon's timer — plus optional periodic ``tick_s`` cycles while work waits
(for time-driven priorities such as starvation promotion). The run always ends: ticks are only
scheduled while other events remain, and after the last event one final cycle runs; whatever is
still pending then is reported as unfinished with the core's reason.

Checkpoints and the end of a restore or resize transition need no events of their own: the
backend integrates each job's progress piecewise (constant rate between changes) and finds the
last periodic checkpoint arithmetically when it needs it (at a kill), so the heap only holds
events that change what the decision core would see.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from railgang.daemon.clock import SimClock
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.actions import Start
from railgang.daemon.core.model.gang import Placer, topology_placer
from railgang.daemon.core.model.plan import Policy
from railgang.daemon.core.model.reasons import PendingReason, Reason
from railgang.daemon.core.phases.waiting import coded
from railgang.daemon.loop import CycleJournal, run_cycle
from railgang.daemon.pipeline import Pipeline
from railgang.daemon.sim.backend import COMPLETE, KILL, LINK, SimBackend, SimConfig
from railgang.daemon.sim.capacity import SPOT_RECLAIM, SPOT_RETURN
from railgang.daemon.sim.failures import (
    BURN_IN,
    FAIL,
    REPAIR,
    STEP,
    FailureConfig,
    Failures,
    daemon_steps,
)
from railgang.daemon.sim.metrics import JobRecord, Metrics, compute
from railgang.daemon.sim.notice import SHRINK
from railgang.daemon.sim.progress import CommModel
from railgang.daemon.sim.quotas import QuotaUse
from railgang.daemon.sim.traces.model import TraceJob

CAPACITY = "capacity"  # a scheduled change of what the cluster lends (``CapacitySchedule``)
# event kinds in the order they are handled within one instant
_ORDER = {COMPLETE: 0, KILL: 1, SHRINK: 1, SPOT_RETURN: 1, SPOT_RECLAIM: 1, "arrival": 2, "cycle": 3, "tick": 4,
          LINK: 1, CAPACITY: 1, FAIL: 1, REPAIR: 1, BURN_IN: 1}


class CapacitySchedule(Protocol):
    """Events on a schedule known before the replay (the serving controller's clock:
    ``daemon/serving/replay.py``). ``events()`` lists (time, key); ``apply(key, backend, now)``
    makes the change and says whether the core should look again. A schedule may carry a
    ``pipeline`` (``pipeline.Pipeline``): its steps run after the failure steps."""

    def events(self) -> Sequence[tuple[float, str]]: ...

    def apply(self, key: str, backend: SimBackend, now: float) -> bool: ...


@dataclass(frozen=True)
class EngineConfig:
    sim: SimConfig = field(default_factory=SimConfig)
    cycle_s: float = 0.0  # 0 = a cycle at every instant something changed; else a quantum
    # the quantum grows with the time simulated, to cycle_growth x (now - start) when that is
    # longer (0 = fixed): a forward estimate is exact near now and proportionally coarse later
    cycle_growth: float = 0.0
    tick_s: float = 0.0  # periodic cycles while jobs wait (0 = off)
    max_pending: int | None = None  # queue length shown to the core per cycle (None = all)
    seed: int = 0
    cycle: CycleConfig | None = None  # the core's cycle knobs (None = its defaults)
    # skip the core when it provably has nothing to do (nobody waits, no elastic job runs, no
    # link health, one GPU pool, no quota tree): same schedule, same rng draws (issue 12, speed).
    # False = run the core at every cycle (to check that skipping changes nothing)
    skip_idle: bool = True
    failures: FailureConfig | None = None  # node and leaf failures (``--failures``; failures.py)
    # the steps before the core (pipeline.py), built afresh for each replay; None: with
    # failures, the daemon's with its default settings (``failures.daemon_steps``), else none
    steps: Callable[[], Pipeline] | None = None


@dataclass
class RunResult:
    policy: str
    metrics: Metrics
    records: list[JobRecord]
    cycles: int
    events: int
    wall_s: float
    unfinished_reasons: dict[str, str]
    failed_actions: Counter[str]
    quota_use: QuotaUse | None = None  # with a quota tree: GPUs per account, borrowing, reclaims
    migrations: int = 0  # jobs moved off degraded links (--degrade; core/phases/migrate.py)
    stopped: str | None = None  # a bounded replay: why it stopped early (see ``Bounds``)
    ended_at: float | None = None  # simulated time when the replay stopped
    skipped: int = 0  # of ``cycles``, those the core provably had nothing to do in (skip_idle)
    failures: Failures | None = None  # with ``EngineConfig.failures``: the process and its log


@dataclass(frozen=True)
class Bounds:
    """Where a bounded replay stops early (a what-if from a live queue must answer quickly).

    ``stopped`` on the result names the bound that hit: ``"horizon"`` (the next event lies past
    ``until``), ``"events"``, ``"wall"``, or ``"done"`` (``done(backend)`` held after a cycle).
    """

    until: float = math.inf  # simulated time; events after it are not handled
    max_events: int | None = None  # events handled at most
    wall_s: float | None = None  # wall-clock seconds at most (checked between events)
    done: Callable[[SimBackend], bool] | None = None  # checked after every cycle


class _Heap:
    """The event queue; also the backend's ``EventSink``."""

    def __init__(self) -> None:
        self.items: list[tuple[float, int, int, str, str, int]] = []
        self.seq = 0

    def at(self, t: float, kind: str, job_id: str, version: int) -> None:
        self.seq += 1
        heapq.heappush(self.items, (t, _ORDER[kind], self.seq, kind, job_id, version))

    def pop(self) -> tuple[float, str, str, int]:
        t, _, _, kind, job_id, version = heapq.heappop(self.items)
        return t, kind, job_id, version

    def __len__(self) -> int:
        return len(self.items)


class _Replay:
    """One replay: the event heap, the clock, the backend and the counters the result reports."""

    def __init__(self, jobs: Sequence[TraceJob], policy: Policy, fabric: Any, config: EngineConfig,
                 comm: CommModel | None, placer: Placer,
                 on_progress: Callable[[int, int], None] | None, *, start: float | None = None,
                 bounds: Bounds | None = None,
                 observer: Callable[[float, SimBackend], None] | None = None,
                 capacity: CapacitySchedule | None = None,
                 backend_class: type[SimBackend] = SimBackend,
                 journal: CycleJournal | None = None) -> None:
        self.policy, self.config, self.placer, self.on_progress = policy, config, placer, on_progress
        self.bounds, self.observer, self.capacity = bounds, observer, capacity
        self.journal = journal  # the cycles' actions, as the daemon's journal records them
        # the steps before the core (pipeline.py): the daemon's (with failures), a capacity
        # schedule's own in place of the daemon's step of the same name (the serving step,
        # watched: serving/replay.py ``SimServing``), else appended
        own: Pipeline | None = getattr(capacity, "pipeline", None)
        self.steps = own
        if config.steps is not None or config.failures is not None:
            built = (config.steps or daemon_steps)()
            if own is not None:
                mine = {s.name: s for s in own.steps}
                steps = [mine.pop(s.name, s) for s in built.steps] + list(mine.values())
                built = Pipeline(steps, built.stores, {**built.readers, **own.readers})
            self.steps = built
        self.stopped: str | None = None
        self.deadline = math.inf
        self.heap = _Heap()
        self.clock = SimClock(start if start is not None else jobs[0].submit_time if jobs else 0.0)
        self.origin = start or 0.0  # cycle quanta count from here (a replay from a snapshot)
        # sim --ledger's logging backend comes in here, before the failure process binds to it
        self.backend = backend_class(fabric, config=config.sim, comm=comm, events=self.heap,
                                     max_pending=config.max_pending)
        self.rng = random.Random(config.seed)
        self.by_id = {tj.job_id: tj for tj in jobs}
        for tj in jobs:
            self.heap.at(tj.submit_time, "arrival", tj.job_id, 0)
        for t, key in capacity.events() if capacity is not None else ():
            self.heap.at(t, CAPACITY, key, 0)
        self.cycle_at: float | None = None  # time of the one cycle already queued
        self.tick_at: float | None = None  # time of the one periodic tick already queued
        self.cycles = self.events = self.skipped = 0
        self.failed: Counter[str] = Counter()
        nodes = self.backend.nodes.values()
        self.one_pool = len({(n.facts.gpu_type, n.tier) for n in nodes}) <= 1
        # no job of the trace has an elastic range: idle() need not look at the running jobs
        # (a replay seeded from a live snapshot has no trace: it looks)
        self.rigid = bool(jobs) and all(tj.elastic_min is None and tj.elastic_max is None
                                        for tj in jobs)
        self.last_reasons: Sequence[PendingReason] = ()  # rendered only at the end
        self.total = len(jobs)
        self.arrivals_left = len(jobs)
        self.failures: Failures | None = None
        if config.failures is not None:
            self.failures = Failures(self.backend, config.failures, self.heap, self._alive)
            self.failures.start(self.clock.now())
            assert self.steps is not None
            self.steps.readers.setdefault(STEP, self.failures.facts)  # what Slurm would show
        self.step = max(1, self.total // 200)
        self.done_reported = 0

    def run(self) -> None:
        """Drain the heap; when it is empty but jobs still wait, one last look, until stable."""
        if self.bounds is not None and self.bounds.wall_s is not None:
            self.deadline = time.perf_counter() + self.bounds.wall_s
        while True:
            self.drain()
            if self.stopped is not None or not self.backend.pending:
                break
            self.cycle(self.clock.now())  # nothing left to wake up for: one last look
            if not self.heap.items:
                break  # the core starts nothing more: what waits is reported unfinished
        if self.on_progress is not None:
            self.on_progress(self.backend.finished, self.total)

    def drain(self) -> None:
        heap, backend, bounds = self.heap, self.backend, self.bounds
        while heap.items:
            if bounds is not None and self.stopped is None:
                self.stopped = self._bound_hit(heap.items[0][0])
            if self.stopped is not None:
                return
            t, kind, job_id, version = heap.pop()
            self.clock.advance_to(t)
            self.events += 1
            if kind == "arrival":
                self.arrivals_left -= 1
                if backend.submit(self.by_id[job_id], t):
                    if self.failures is not None:
                        self.failures.admitted(job_id)
                    self.want_cycle(t)
            elif kind == "cycle":
                if self.cycle_at is not None and t >= self.cycle_at:
                    self.cycle_at = None
                self.cycle(t)
            elif kind == "tick":
                self.tick_at = None
                if self.cycle_at is None or self.cycle_at > t:
                    self.cycle(t)
            elif kind == CAPACITY:
                assert self.capacity is not None
                if self.capacity.apply(job_id, backend, t):
                    self.want_cycle(t)
            elif kind in (FAIL, REPAIR, BURN_IN):
                assert self.failures is not None
                if self.failures.on_event(kind, job_id, t):
                    self.want_cycle(t)
            elif backend.on_event(kind, job_id, version, t):
                if kind == KILL and self.failures is not None:
                    self.failures.requeued(job_id)  # a fault's kill is no preemption
                self.want_cycle(t)
            if self.on_progress is not None and backend.finished - self.done_reported >= self.step:
                self.done_reported = backend.finished
                self.on_progress(self.done_reported, self.total)

    def _alive(self) -> bool:
        """Can a failure hit anything (a job running, or one still to arrive)?"""
        return bool(self.backend.running or self.arrivals_left)

    def _bound_hit(self, t: float) -> str | None:
        """The bound the next event (at ``t``) would cross, if any."""
        b = self.bounds
        assert b is not None
        if t > b.until:
            return "horizon"
        if b.max_events is not None and self.events >= b.max_events:
            return "events"
        if self.deadline < math.inf and time.perf_counter() > self.deadline:
            return "wall"
        return None

    def want_cycle(self, now: float) -> None:
        """Queue a decision cycle at ``now`` (or at the next quantum boundary), once."""
        t = now
        if self.config.cycle_s > 0:
            q = max(self.config.cycle_s, self.config.cycle_growth * (now - self.origin))
            t = self.origin + math.ceil((now - self.origin) / q) * q
        if self.cycle_at is None or self.cycle_at > t:
            self.cycle_at = t
            self.heap.at(t, "cycle", "", 0)

    def idle(self) -> bool:
        """Would the core provably decide nothing now? Nobody waits (so no start, reservation,
        reclaim or eviction), no running job is elastic (no shrink or grow), no link health and
        no lame-link tag (no migration, no node hygiene), one GPU pool (no upgrade), no quota
        tree (its attainment is observed at each snapshot)."""
        b = self.backend
        if b.pending or b.health is not None or not self.one_pool or b.quota_use is not None:
            return False
        if not self.rigid and any(sj.job.elastic for sj in b.running.values()):
            return False
        return not any(n.tags for n in b.nodes.values())

    def cycle(self, now: float) -> None:
        config, backend = self.config, self.backend
        # the steps see every cycle (a fault's requeue, a burn-in's end are theirs to answer)
        if config.skip_idle and self.steps is None and self.idle():
            self.rng.randrange(2**31)  # the placement seed decide() draws: later cycles unchanged
            self.skipped += 1
            reasons: Sequence[PendingReason] = ()
        else:
            reasons = self._decide(now)
        self.cycles += 1
        self.last_reasons = reasons
        # work conservation: bookkeeping of what this cycle left idle, never a decision input
        # (the free GPUs only matter to it while a job waits, most cycles have none waiting)
        free = sum(len(g) for n, g in backend.free.items()
                   if backend.nodes[n].state.usable) if reasons else 0
        backend.recorder.cycle(now, free, reasons)
        if config.tick_s > 0 and self.tick_at is None and backend.pending and backend.running:
            self.tick_at = now + config.tick_s
            self.heap.at(self.tick_at, "tick", "", 0)
        if self.failures is not None and self.failures.paused and backend.running:
            self.failures.resume(now)
        if self.observer is not None:
            self.observer(now, backend)
        done = self.bounds.done if self.bounds is not None else None
        if done is not None and self.stopped is None and done(backend):
            self.stopped = "done"

    def _decide(self, now: float) -> Sequence[PendingReason]:
        """One cycle through the core (``run_cycle``); its reasons."""
        config, backend = self.config, self.backend
        truncated = config.max_pending is not None and len(backend.pending) > config.max_pending
        outcome = run_cycle(backend, self.policy, self.clock, self.rng, config=config.cycle,
                            placer=self.placer, health=backend.health, steps=self.steps,
                            journal=self.journal)
        if truncated and any(isinstance(r.action, Start) and r.ok for r in outcome.results):
            self.want_cycle(now)  # the core saw only part of the queue and made room: look again
        for result in outcome.failed:
            self.failed[f"{type(result.action).__name__}: {result.detail.split(' ')[0]}"] += 1
        if self.steps is not None and self.steps.held_nodes():
            return outcome.reasons  # a flaky node held out shrinks the cluster for a while only
        for pr in coded(outcome.reasons, Reason.LARGER_THAN_CLUSTER):  # not the whole queue's
            backend.reject(pr.job_id, pr.detail or "larger than the cluster", now)
        return outcome.reasons

    def result(self, wall_s: float) -> RunResult:
        backend = self.backend
        reasons = {pr.job_id: pr.render() for pr in self.last_reasons}
        unfinished = {jid: reasons.get(jid, "") for jid in backend.pending_ids()}
        unfinished.update({jid: "still running" for jid in backend.running})
        return RunResult(policy=getattr(self.policy, "name", type(self.policy).__name__),
                         metrics=compute(backend.records, backend.total_gpus),
                         records=backend.records, cycles=self.cycles, events=self.events,
                         wall_s=wall_s, unfinished_reasons=unfinished, failed_actions=self.failed,
                         quota_use=backend.quota_use, migrations=len(backend.migrated), stopped=self.stopped,
                         ended_at=self.clock.now(), skipped=self.skipped, failures=self.failures)


def simulate(
    jobs: Sequence[TraceJob],
    policy: Policy,
    fabric: Any,
    *,
    config: EngineConfig = EngineConfig(),
    comm: CommModel | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    placer: Placer = topology_placer,
    observer: Callable[[float, SimBackend], None] | None = None,
    capacity: CapacitySchedule | None = None,
    bounds: Bounds | None = None,
    journal: CycleJournal | None = None,
) -> RunResult:
    """Replay ``jobs`` (ordered by submit time) under ``policy`` on ``fabric``. ``observer(now,
    backend)`` is called after every cycle (a benchmark takes snapshots there; read only);
    ``journal`` is handed every cycle's snapshot, actions and results (``loop.CycleJournal``);
    ``capacity`` takes nodes away and gives them back on its schedule (serving/replay.py);
    ``bounds`` stops the replay early (``until``: a fixed span of simulated time)."""
    started = time.perf_counter()
    with _few_collections(), _steps_quiet():
        replay = _Replay(jobs, policy, fabric, config, comm, placer, on_progress, observer=observer,
                         capacity=capacity, bounds=bounds, journal=journal)
        replay.run()
        return replay.result(time.perf_counter() - started)


@contextlib.contextmanager
def _steps_quiet() -> Iterator[None]:
    """The failure step's warning per fault is the daemon's log; a replay counts its faults in
    its summary instead (``failure_summary``), and thousands of them would flood the terminal."""
    logger = logging.getLogger("railgang.daemon.failures")
    old = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(old)


# young objects the cyclic collector lets pile up before it runs during a replay (Python: 700)
REPLAY_GC_THRESHOLD = 50_000


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """Run the cyclic garbage collector rarely during a replay: each cycle allocates a few
    hundred short-lived, acyclic objects (the snapshot's views, freed by reference counting),
    and at Python's default threshold they set off a collection almost every cycle, whose older
    generations also walk every long-lived object of the trace: a fifth of a 10,000-job replay
    (issue 12, speed). What exists before the replay is frozen out of the walk (``gc.freeze``).
    Only time changes; the schedule cannot (nothing in it depends on when memory is freed)."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(old[0], REPLAY_GC_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


def replay_from(
    seed: Callable[[SimBackend], object],
    start: float,
    policy: Policy,
    fabric: Any,
    *,
    bounds: Bounds,
    config: EngineConfig = EngineConfig(),
    comm: CommModel | None = None,
    placer: Placer = topology_placer,
) -> RunResult:
    """A bounded replay with no arrivals, from a cluster that ``seed(backend)`` fills at time
    ``start`` (``sim.seed.load`` seeds it from a live snapshot): the forward simulation of
    ``railgang.daemon.service.estimate``. The first cycle runs at ``start``."""
    began = time.perf_counter()
    replay = _Replay((), policy, fabric, config, comm, placer, None, start=start, bounds=bounds)
    seed(replay.backend)
    replay.want_cycle(start)
    replay.run()
    return replay.result(time.perf_counter() - began)


__all__ = ["CAPACITY", "Bounds", "CapacitySchedule", "EngineConfig", "RunResult", "replay_from",
           "simulate"]
