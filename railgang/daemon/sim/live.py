"""The simulator in wall-clock time: the daemon's ``slurm.backend = "sim"`` demo (a simulated
cluster of the dev cluster's shape fed with a seeded stream of mixed jobs), and the backend the
daemon's own tests and the start-time estimate's benchmarks drive.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
from collections.abc import Sequence
from typing import Any

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.job import PriorityClass
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.sim.traces.model import TraceJob


class LiveSim:
    """``SimBackend`` in wall-clock time: arrivals and completions happen when ``now`` passes
    them (the discrete-event engine's job, done lazily at each snapshot)."""

    def __init__(self, fabric: Any, jobs: list[TraceJob], start: float, **sim_args: Any) -> None:
        self._events: list[tuple[float, int, str, str, int]] = []
        self._seq = 0
        self.sim = SimBackend(fabric, events=self, **sim_args)
        self.start = start
        self._arrivals = sorted(jobs, key=lambda j: (j.submit_time, j.job_id))
        self._next = 0

    def at(self, time: float, kind: str, job_id: str, version: int) -> None:  # EventSink
        self._seq += 1
        heapq.heappush(self._events, (time, self._seq, kind, job_id, version))

    def _catch_up(self, now: float) -> None:
        while True:
            arrival = (self.start + self._arrivals[self._next].submit_time
                       if self._next < len(self._arrivals) else float("inf"))
            event = self._events[0][0] if self._events else float("inf")
            t = min(arrival, event)
            if t > now:
                return
            if arrival <= event:
                tj = self._arrivals[self._next]
                self._next += 1
                self.sim.submit(_at(tj, arrival), arrival)
            else:
                _, _, kind, job_id, version = heapq.heappop(self._events)
                self.sim.on_event(kind, job_id, version, t)

    def snapshot(self, now: float) -> Snapshot:
        self._catch_up(now)
        return self.sim.snapshot(now)

    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        return self.sim.apply(actions, now)


def _at(tj: TraceJob, t: float) -> TraceJob:
    return dataclasses.replace(tj, submit_time=t)


def demo_jobs(n: int, seed: int, *, max_gpus: int, spread_s: float = 120.0) -> list[TraceJob]:
    """A seeded mix: 1–32 GPUs (capped at the cluster), tp hints, some elastic, classes 0–3;
    a third queued at once (something to place in the first cycle), the rest arriving over
    ``spread_s`` seconds; each runs one to ten minutes."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n):
        gpus = min(max_gpus, rng.choice((1, 2, 4, 8, 8, 16, 16, 32)))
        tp = min(gpus, rng.choice((1, 2, 4, 8)))
        dp = gpus // tp
        elastic = dp > 1 and rng.random() < 0.3
        jobs.append(TraceJob(
            job_id=f"demo-{i + 1}", gpus=tp * dp,
            submit_time=0.0 if i < n // 3 else round(rng.uniform(0, spread_s), 1),
            duration_s=round(rng.uniform(60, 600)), account=rng.choice(("team-a", "team-b")),
            tp=tp, dp=dp, elastic_min=1 if elastic else None, elastic_max=dp if elastic else None,
            priority_class=PriorityClass(rng.choice((0, 1, 2, 3, 3, 3)))))
    return jobs


__all__ = ["LiveSim", "demo_jobs"]
