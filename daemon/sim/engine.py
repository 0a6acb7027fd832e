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

import heapq
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from railgang.daemon.clock import SimClock
from railgang.daemon.core.actions import Start
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.gang import Placer, topology_placer
from railgang.daemon.core.policy import Policy
from railgang.daemon.core.reasons import PendingReason, Reason
from railgang.daemon.loop import run_cycle
from railgang.daemon.sim.metrics import JobRecord, Metrics, compute
from railgang.daemon.sim.progress import CommModel
from railgang.daemon.sim.traces.model import TraceJob
from railgang.daemon.slurm.sim import COMPLETE, KILL, SimBackend, SimConfig

# event kinds in the order they are handled within one instant
_ORDER = {COMPLETE: 0, KILL: 1, "arrival": 2, "cycle": 3, "tick": 4}


@dataclass(frozen=True)
class EngineConfig:
    sim: SimConfig = field(default_factory=SimConfig)
    cycle_s: float = 0.0  # 0 = a cycle at every instant something changed; else a quantum
    tick_s: float = 0.0  # periodic cycles while jobs wait (0 = off)
    max_pending: int | None = None  # queue length shown to the core per cycle (None = all)
    seed: int = 0
    cycle: CycleConfig | None = None  # the core's cycle knobs (None = its defaults)


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


class _Heap:
    """The event queue; also the backend's ``EventSink``."""

    def __init__(self) -> None:
        self.items: list[tuple[float, int, int, str, str, int]] = []
        self.seq = 0

    def at(self, t: float, kind: str, job_id: str, version: int) -> None:
        self.seq += 1
        heapq.heappush(self.items, (t, _ORDER[kind], self.seq, kind, job_id, version))

    def __len__(self) -> int:
        return len(self.items)


def simulate(
    jobs: Sequence[TraceJob],
    policy: Policy,
    fabric: Any,
    *,
    config: EngineConfig = EngineConfig(),
    comm: CommModel | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    placer: Placer = topology_placer,
) -> RunResult:
    """Replay ``jobs`` (ordered by submit time) under ``policy`` on ``fabric``."""
    started = time.perf_counter()
    heap = _Heap()
    clock = SimClock(jobs[0].submit_time if jobs else 0.0)
    backend = SimBackend(fabric, config=config.sim, comm=comm, events=heap,
                         max_pending=config.max_pending)
    rng = random.Random(config.seed)
    by_id = {}
    for tj in jobs:
        by_id[tj.job_id] = tj
        heap.at(tj.submit_time, "arrival", tj.job_id, 0)
    cycle_at: float | None = None  # time of the one cycle already queued
    tick_at: float | None = None  # time of the one periodic tick already queued
    cycles = events = 0
    failed: Counter[str] = Counter()
    last_reasons: list[tuple[PendingReason, ...]] = [()]  # rendered only at the end
    total = len(jobs)
    step = max(1, total // 200)
    done_reported = 0

    def want_cycle(now: float) -> None:
        nonlocal cycle_at
        t = now
        if config.cycle_s > 0:
            t = math.ceil(now / config.cycle_s) * config.cycle_s
        if cycle_at is None or cycle_at > t:
            cycle_at = t
            heap.at(t, "cycle", "", 0)

    def cycle(now: float) -> None:
        nonlocal cycles
        truncated = config.max_pending is not None and len(backend.pending) > config.max_pending
        outcome = run_cycle(backend, policy, clock, rng, config=config.cycle, placer=placer)
        cycles += 1
        if truncated and any(isinstance(r.action, Start) and r.ok for r in outcome.results):
            want_cycle(now)  # the core saw only part of the queue and made room: look again
        for result in outcome.failed:
            failed[f"{type(result.action).__name__}: {result.detail.split(' ')[0]}"] += 1
        larger = Reason.LARGER_THAN_CLUSTER
        for pr in outcome.reasons:
            if pr.code is larger:
                backend.reject(pr.job_id, pr.detail or "larger than the cluster", now)
        last_reasons[0] = outcome.reasons
        nonlocal tick_at
        if (config.tick_s > 0 and tick_at is None and backend.pending
                and backend.running):
            tick_at = now + config.tick_s
            heap.at(tick_at, "tick", "", 0)

    def _drain() -> None:
        nonlocal cycle_at, tick_at, events, done_reported
        while heap.items:
            t, _, _, kind, job_id, version = heapq.heappop(heap.items)
            clock.advance_to(t)
            events += 1
            if kind == "arrival":
                if backend.submit(by_id[job_id], t):
                    want_cycle(t)
            elif kind == "cycle":
                if cycle_at is not None and t >= cycle_at:
                    cycle_at = None
                cycle(t)
            elif kind == "tick":
                tick_at = None
                if cycle_at is None or cycle_at > t:
                    cycle(t)
            elif backend.on_event(kind, job_id, version, t):
                want_cycle(t)
            if on_progress is not None and backend.finished - done_reported >= step:
                done_reported = backend.finished
                on_progress(done_reported, total)
    while True:
        _drain()
        if not backend.pending:
            break
        cycle(clock.now())  # nothing left to wake up for: one last look
        if not heap.items:
            break  # the core starts nothing more: what waits is reported unfinished
    if on_progress is not None:
        on_progress(backend.finished, total)
    reasons = {pr.job_id: pr.render() for pr in last_reasons[0]}
    unfinished = {jid: reasons.get(jid, "") for jid in backend.pending_ids()}
    unfinished.update({jid: "still running" for jid in backend.running})
    metrics = compute(backend.records, backend.total_gpus)
    return RunResult(policy=getattr(policy, "name", type(policy).__name__), metrics=metrics,
                     records=backend.records, cycles=cycles, events=events,
                     wall_s=time.perf_counter() - started, unfinished_reasons=unfinished,
                     failed_actions=failed)


__all__ = ["EngineConfig", "RunResult", "simulate"]
