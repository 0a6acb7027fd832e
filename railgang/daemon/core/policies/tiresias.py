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
            levels={r.job_id: float(bucket(r.attained_at(now), self.thresholds_gpu_h))
                    for r in snapshot.running.values()},
            preempt_within_class=True,
        )
        return hetero.aware(plan, snapshot) if self.hetero else plan


POLICY = Tiresias
