"""Elastic sizing rules (DESIGN R-S6): marginal utility from η(k), amortised transition cost.

Growth and shrink change the number of DP replicas only; a replica (``tp × pp`` GPUs) is atomic.

- :func:`resize_pays` — a resize from ``cur`` to ``new`` replicas is worth it only if (1) the
  relative throughput change is at least ``min_gain`` (no resize for one freed node on a saturated
  curve), (2) the last resize (or the start) was at least ``min_interval_s`` ago (no churn), and
  (3) for growth, the time saved over the job's remaining run is at least ``amortise`` × the
  transition cost (when the remaining work is known).
- :func:`start_small_pays` — start an elastic job below its target now, instead of waiting
  ``wait_s`` for the full gang, when the expected wait + run is lower (seed: 32→64→128 beats
  waiting 8 h for 128).
- :func:`shrink_assignment` — which GPUs a shrink gives back (whole replicas, last nodes first).
- :func:`fill_by_marginal_gain` — hand out spare GPUs one replica at a time to the highest gain
  per GPU (the water-filling step Pollux uses for goodput and Themis for its ρ auction).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from railgang.daemon.core.job import Assignment, Job, RunningJob


@dataclass(frozen=True)
class ElasticRules:
    min_gain: float = 0.10  # minimum relative throughput gain for a grow (marginal utility)
    min_interval_s: float = 600.0  # minimum time between two resizes of one job
    amortise: float = 3.0  # time saved must exceed amortise × transition cost


def marginal_gain(job: Job, cur: int, new: int) -> float:
    """Relative throughput change of moving from ``cur`` to ``new`` replicas (speedup ratio − 1)."""
    base = job.speedup(cur)
    if base <= 0:
        return float("inf") if new > 0 else 0.0
    return job.speedup(new) / base - 1.0


def resize_pays(run: RunningJob, new: int, now: float, rules: ElasticRules) -> bool:
    """Whether resizing ``run`` to ``new`` replicas passes the anti-churn rules."""
    job, cur = run.job, run.replicas
    if new == cur or not job.min_replicas <= new <= job.max_replicas:
        return False
    last = run.last_resize_time if run.last_resize_time is not None else run.start_time
    if now - last < rules.min_interval_s:
        return False
    if new < cur:
        return True  # shrinks are asked for by the policy to free capacity; interval suffices
    if marginal_gain(job, cur, new) < rules.min_gain:
        return False
    left = job.remaining_at(cur)
    if left is None:
        return True
    saved = left * (1.0 - job.speedup(cur) / job.speedup(new))
    return saved >= rules.amortise * job.transition_cost_s


def completion_if_small(job: Job, small: int, target: int, wait_s: float) -> float | None:
    """Seconds to finish when starting at ``small`` now and growing to ``target`` after ``wait_s``."""
    if job.work_remaining_s is None:
        return None
    work = job.work_remaining_s
    done = job.rate(small) * wait_s
    if done >= work:
        return work / job.rate(small)
    return wait_s + job.transition_cost_s + (work - done) / job.rate(target)


def start_small_pays(job: Job, small: int, target: int, wait_s: float) -> bool:
    """True when starting at ``small`` replicas now beats waiting ``wait_s`` for ``target``."""
    if small >= target:
        return True
    if small < job.min_replicas or job.rate(small) <= 0:
        return False
    small_t = completion_if_small(job, small, target, wait_s)
    full_left = job.remaining_at(target)
    if small_t is None or full_left is None:
        return wait_s > job.transition_cost_s  # unknown work: any wait longer than a resize
    return small_t < wait_s + full_left


def shrink_assignment(run: RunningJob, replicas: int) -> tuple[Assignment, Assignment]:
    """Split ``run``'s assignment into (kept, released) keeping ``replicas`` whole replicas.

    GPUs are kept in node-name then index order, so a node's GPUs stay together and the released
    ones are the tail (whole nodes first on multi-node jobs); every count is a multiple of
    ``tp × pp`` because replicas are atomic.
    """
    keep_n = replicas * run.job.replica_gpus
    kept: dict[str, tuple[int, ...]] = {}
    released: dict[str, tuple[int, ...]] = {}
    seen = 0
    for node, gpus in sorted(run.assignment.items()):
        take = max(0, min(len(gpus), keep_n - seen))
        if take:
            kept[node] = gpus[:take]
        if take < len(gpus):
            released[node] = gpus[take:]
        seen += take
    return kept, released


def fill_by_marginal_gain(members: Iterable[str], alloc: dict[str, int], jobs: Mapping[str, Job],
                          capacity: int, gain: Callable[[Job, int], float]) -> int:
    """Grow ``alloc`` (job id -> replicas, updated in place) one replica at a time.

    Each step goes to the job whose next replica has the highest ``gain(job, replicas_now)`` per
    GPU; a job stops at its ``max_replicas``, when its gain is no longer positive, or when its
    replica no longer fits. Ties break by job id, so the result is deterministic. Returns the
    capacity left over.
    """

    def per_gpu(i: str) -> float:
        return gain(jobs[i], alloc[i]) / jobs[i].replica_gpus

    heap = [(-per_gpu(i), i) for i in sorted(members) if alloc[i] < jobs[i].max_replicas]
    heapq.heapify(heap)
    while heap:
        neg, i = heapq.heappop(heap)
        j = jobs[i]
        if neg >= 0 or j.replica_gpus > capacity:
            continue
        alloc[i] += 1
        capacity -= j.replica_gpus
        if alloc[i] < j.max_replicas:
            heapq.heappush(heap, (-per_gpu(i), i))
    return capacity


def default_target(run: RunningJob) -> int:
    """Without a goodput model, an elastic job wants its maximum (growth is gated by rules)."""
    return run.job.max_replicas


__all__ = [
    "ElasticRules",
    "completion_if_small",
    "default_target",
    "fill_by_marginal_gain",
    "marginal_gain",
    "resize_pays",
    "shrink_assignment",
    "start_small_pays",
]
