"""Tiresias: duration-agnostic 2D least-attained-service with discretised queues (DESIGN R-S2).

Attained service = GPUs × time received so far (``Job.attained_gpu_s``). Jobs fall into queues by
GPU-hours thresholds (default <1, 1–10, 10–100, >100); lower queues first. A job that has waited
``promote_after_s`` since it (re)entered the queue is promoted to queue 0 (starvation guard).

Ordering key: 1. queue (after promotion), 2. time it entered the queue (submit or last
preemption), 3. job id. Jobs are rigid; ``mode="greedy"`` (skip what does not fit). Running jobs
get their queue as *level*, and a waiting job may preempt same-class running work in a strictly
higher queue (Tiresias is preemptive), within the cycle's budgets.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from railgang.daemon.core.model import pools as hetero
from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.plan import Plan, regrow_targets, want
from railgang.daemon.core.model.snapshot import Snapshot

GPU_HOUR = 3600.0


def bucket(attained_gpu_s: float, thresholds_gpu_h: tuple[float, ...] = (1.0, 10.0, 100.0)) -> int:
    """Queue index for an attained service: 0 for < thresholds[0] GPU-hours, and so on."""
    return bisect.bisect_right(thresholds_gpu_h, attained_gpu_s / GPU_HOUR)


def queued_since(job: Job) -> float:
    return job.last_preempted_at if job.last_preempted_at is not None else job.submit_time


class Levels(Mapping[str, float]):
    """Each running job's Tiresias queue as its level, computed on first read: only an eviction
    search reads them, and most cycles have none.
    ``by_preemptions``: less ``p / (2 (p + 1))`` for a job preempted ``p`` times, so inside a
    queue the job evicted least often goes first and the level stays in (queue − ½, queue]
    (``default``'s rule, its module docstring point 5)."""

    def __init__(self, snapshot: Snapshot, thresholds: tuple[float, ...], *, by_preemptions: bool = False) -> None:
        self._snapshot, self._thresholds, self._by_preemptions = snapshot, thresholds, by_preemptions
        self._levels: dict[str, float] | None = None

    def _all(self) -> dict[str, float]:
        if self._levels is None:
            t, now, running = self._thresholds, self._snapshot.now, self._snapshot.running.values()
            if self._by_preemptions:
                self._levels = {r.job_id: bucket(r.attained_at(now), t) - (p := r.job.preemptions) / (2.0 * (p + 1))
                                for r in running}
            else:
                self._levels = {r.job_id: float(bucket(r.attained_at(now), t)) for r in running}
            self.get = self._levels.get  # type: ignore[method-assign,assignment]  # built: the table's own get
            # answers from now on (what get below answers: test_levels_read_the_same_before_and_after_the_table)
        return self._levels

    def __getitem__(self, job_id: str) -> float:
        return self._all()[job_id]

    def get(self, job_id: str, default: float | None = None) -> float | None:  # type: ignore[override]
        # the level of a job, or default when it does not run (the first read builds the table)
        return self._all().get(job_id, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


@dataclass(frozen=True)
class Tiresias:
    name = "tiresias"
    thresholds_gpu_h: tuple[float, ...] = (1.0, 10.0, 100.0)
    promote_after_s: float = 4 * 3600.0  # starvation guard: waited this long → queue 0
    hetero: bool = True  # several GPU pools: place by per-type throughput (hetero.aware); False =
    # type-blind

    def queue(self, job: Job, now: float) -> int:
        if now - queued_since(job) >= self.promote_after_s:
            return 0
        return bucket(job.attained_gpu_s, self.thresholds_gpu_h)

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        keyed = sorted((self.queue(j, now), queued_since(j), j.job_id, j) for j in snapshot.pending)
        plan = Plan(
            order=tuple(want(j.job_id, j.replicas, level=q) for q, _, _, j in keyed),
            mode="greedy",
            targets=regrow_targets(snapshot),
            levels=Levels(snapshot, self.thresholds_gpu_h),
            preempt_within_class=True,
        )
        return hetero.aware(plan, snapshot) if self.hetero else plan


POLICY = Tiresias
