"""Elastic sizing rules (DESIGN R-S6): marginal utility from η(k), amortised transition cost.

Growth and shrink change the number of DP replicas only; a replica (``tp × pp`` GPUs) is atomic.

- :func:`resize_pays` — a resize from ``cur`` to ``new`` replicas is worth it only if (1) the
  relative throughput change is at least ``min_gain`` (no resize for one freed node on a saturated
  curve), (2) the last resize (or the start) was at least ``min_interval_s`` ago (no churn), and
  (3) for growth, the time saved over the job's remaining run is at least ``amortise`` × the
  transition cost (when the remaining work is known); a shrink the policy asks for, (4) that the
  job would still run when the shrink's notice ends (:func:`outlasts_notice`).
- :func:`start_small_pays` — start an elastic job below its target now, instead of waiting
  ``wait_s`` for the full gang, when the expected wait + run is lower (seed: 32→64→128 beats
  waiting 8 h for 128).
- :func:`shrink_assignment` — which GPUs a shrink gives back (whole replicas, last nodes first).
- :func:`fill_by_marginal_gain` — hand out spare GPUs one replica at a time to the highest gain
  per GPU (the water-filling step Themis uses for its ρ auction).
- :func:`wastes_gpus` — the curve is super-linear between two sizes: running at the smaller one
  throws away GPU time (a Philly job measured at 1.2× per GPU on 4 GPUs runs 17 % slower per GPU
  on 2), so such a job is never started below its asked size.
- :func:`start_size` — the size an elastic job is admitted at: its asked size when it fits, else
  the largest size that fits and does not waste GPUs.
- :func:`fill_by_chunks` — hand out spare GPUs to running and admitted elastic jobs by the highest
  gain per GPU of the best *chunk* (the upper concave envelope of the job's value curve), so a
  super-linear job's growth is valued over the whole step that makes it pay; growth of what runs
  wins ties over what just started (issue 12 part 4; Pollux sizing uses it).
- :func:`pays_without_growth`, :func:`lowest_start` — the policies' small-start test: the run at
  the small size *alone* must beat waiting for the asked size (:func:`wait_for` estimates the
  wait from what runs); regrowth is a bonus, not the premise.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from railgang.daemon.core.model.job import Assignment, Job, RunningJob
from railgang.daemon.core.model.shadow import Ends


@dataclass(frozen=True)
class ElasticRules:
    min_gain: float = 0.10  # minimum relative throughput gain for a grow (marginal utility)
    min_interval_s: float = 600.0  # minimum time between two resizes of one job
    amortise: float = 3.0  # time saved must exceed amortise × transition cost
    superlinear_tol: float = 0.05  # a smaller size "wastes GPUs" when its per-GPU throughput is
    # more than this share below the asked size's
    # a shrink's notice (Resize.grace_s): the job is signalled and keeps every GPU this long, so
    # the GPUs it gives up serve no start before the backend has really shrunk it. 0 = at once
    # (the core's default: simulated schedules stay as pinned; the daemon sets its
    # daemon.shrink_grace_s, by default the preemption's grace)
    shrink_grace_s: float = 0.0


SUPERLINEAR_TOL = ElasticRules.superlinear_tol


def sizes(job: Job) -> tuple[int, ...]:
    """The sizes an elastic job runs at: its asked size halved and doubled within its range (plus
    the range's ends). Odd sizes (13 of 16, 5 of 8) leave partial nodes behind them and scatter
    the next gang across leaves: the measured placement factor fell to 0.44 (issue 12 part 4)."""
    lo, hi, n = job.min_replicas, job.max_replicas, job.replicas
    out = {lo, n, hi}
    k = n
    while k // 2 >= lo and k > 1:
        k //= 2
        out.add(k)
    k = n
    while k * 2 <= hi:
        k *= 2
        out.add(k)
    return tuple(sorted(x for x in out if lo <= x <= hi))


def wastes_gpus(job: Job, small: int, target: int, tol: float = SUPERLINEAR_TOL) -> bool:
    """True when ``small`` replicas give less throughput per GPU than ``target`` (by more than
    ``tol``): the curve is super-linear in between, so running small burns GPU-hours."""
    if small >= target:
        return False
    return job.efficiency(small) < job.efficiency(target) * (1.0 - tol)


def spans_nodes(job: Job, node_gpus: int) -> bool:
    """True when the asked size needs more than one node of ``node_gpus`` (0: unknown, False).
    Such a gang starts whole: started small, its later growth lands wherever GPUs are free, and
    16-GPU jobs ran 1.5x longer on the scattered placement (issue 12 part 4)."""
    return 0 < node_gpus < job.replicas * job.replica_gpus


def start_size(job: Job, capacity_gpus: int, tol: float = SUPERLINEAR_TOL,
               node_gpus: int = 0) -> int | None:
    """Replicas to admit ``job`` at with ``capacity_gpus`` free: its asked size if it fits, else
    the largest size down to its minimum that fits and does not waste GPUs (and only when the
    asked size fits one node of ``node_gpus``, if given); None: it waits."""
    fit = min(job.replicas, capacity_gpus // job.replica_gpus)
    if spans_nodes(job, node_gpus):
        return job.replicas if fit == job.replicas else None
    for k in reversed(sizes(job)):
        if k <= fit and not wastes_gpus(job, k, job.replicas, tol):
            return k
    return None


def marginal_gain(job: Job, cur: int, new: int) -> float:
    """Relative throughput change of moving from ``cur`` to ``new`` replicas (speedup ratio − 1)."""
    base = job.speedup(cur)
    if base <= 0:
        return float("inf") if new > 0 else 0.0
    return job.speedup(new) / base - 1.0


def smallest_start(job: Job, target: int, tol: float = SUPERLINEAR_TOL, node_gpus: int = 0) -> int:
    """The fewest replicas ``job`` may start (or be shrunk) at below ``target`` without wasting
    GPUs: its minimum on a linear or saturating curve, ``target`` itself on a super-linear one
    or when the asked size spans nodes of ``node_gpus`` (if given)."""
    if spans_nodes(job, node_gpus):
        return max(job.min_replicas, min(target, job.max_replicas))
    for k in sizes(job):
        if k < target and not wastes_gpus(job, k, target, tol):
            return k
    return max(job.min_replicas, min(target, job.max_replicas))


def short_classes(running: Iterable[RunningJob]) -> frozenset[int]:
    """Priority classes with a running elastic job below its asked size. While a class has one,
    its waiting jobs start only at their asked size: freed GPUs regrow what runs before they start
    more work small (a job started small keeps a deficit that new small starts would pile on)."""
    return frozenset(r.job.priority_class for r in running
                     if r.job.elastic and r.replicas < r.job.replicas)


def shrink_pays(run: RunningJob, new: int, now: float, rules: ElasticRules = ElasticRules()) -> bool:
    """Whether shrinking ``run`` to ``new`` replicas to make room for waiting work is worth it:
    not within ``min_interval_s`` of its start or last resize (hysteresis: no shrink right after a
    grow), and not onto a super-linear stretch of its curve (the GPUs it keeps would run slower
    per GPU than the ones it gives away)."""
    job = run.job
    if not job.min_replicas <= new < run.replicas:
        return False
    last = run.last_resize_time if run.last_resize_time is not None else run.start_time
    # no outlasts_notice here: a victim that is not shrunk is preempted instead, which costs a
    # job about to end more than a shrink that never comes into force
    return now - last >= rules.min_interval_s and not wastes_gpus(job, new, run.replicas,
                                                                   rules.superlinear_tol)


def outlasts_notice(run: RunningJob, now: float, rules: ElasticRules) -> bool:
    """Whether ``run`` would still be running when a shrink's notice ends. A shrink takes effect
    only then: a job that ends first gives every GPU back sooner by finishing, and the notice
    would only cost it a checkpoint (unknown work counts as outlasting)."""
    if rules.shrink_grace_s <= 0:
        return True
    left = run.remaining_at(now)
    return left is None or left > rules.shrink_grace_s


def resize_pays(run: RunningJob, new: int, now: float, rules: ElasticRules) -> bool:
    """Whether resizing ``run`` to ``new`` replicas passes the anti-churn rules."""
    job, cur = run.job, run.replicas
    if new == cur or not job.min_replicas <= new <= job.max_replicas:
        return False
    last = run.last_resize_time if run.last_resize_time is not None else run.start_time
    if now - last < rules.min_interval_s:
        return False
    if new < cur:  # asked for by the policy to free capacity: the interval and the notice suffice
        return outlasts_notice(run, now, rules)
    if marginal_gain(job, cur, new) < rules.min_gain:
        return False
    left = run.remaining_at(now)
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
    if small < job.min_replicas or job.rate(small) <= 0 or wastes_gpus(job, small, target):
        return False  # a super-linear job started small wastes the GPUs it holds
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


def _best_chunk(job: Job, k: int, capacity: int,
                value: Callable[[Job, int], float]) -> tuple[float, int]:
    """(gain per GPU, replicas after) of the step from ``k`` with the highest average gain per
    GPU that fits ``capacity`` (at least to the job's minimum); (0, k) when none gains."""
    base = value(job, k) if k > 0 else 0.0
    top = min(job.max_replicas, k + capacity // job.replica_gpus)
    best = (0.0, k)
    for k2 in sizes(job):
        if k2 <= k or k2 > top:
            continue
        g = (value(job, k2) - base) / ((k2 - k) * job.replica_gpus)
        if g > best[0] * (1.0 + 1e-9):
            best = (g, k2)
    return best


def fill_by_chunks(members: Iterable[str], alloc: dict[str, int], jobs: Mapping[str, Job],
                   capacity: int, value: Callable[[Job, int], float],
                   running: frozenset[str] = frozenset()) -> int:
    """Grow ``alloc`` (job id -> replicas, updated in place) into ``capacity`` GPUs.

    Each step gives the job with the highest gain per GPU its best chunk: the step to the size
    with the highest *average* gain per GPU from where it is (on a super-linear curve that is the
    whole way to its maximum, not one replica whose gain alone looks poor). ``value(job, k)`` is
    the job's progress rate normalised by its own rate (at its asked size), so a GPU is worth the
    same fraction of any job's run. Ties go to jobs in ``running`` (growing what runs costs no
    new start), then to the job id. Returns the capacity left over.
    """
    heap: list[tuple[float, int, str, int, int]] = []

    def push(i: str) -> None:
        g, to = _best_chunk(jobs[i], alloc[i], capacity, value)
        if to > alloc[i] and g > 0:
            heapq.heappush(heap, (-g, 0 if i in running else 1, i, alloc[i], to))

    for i in sorted(members):
        push(i)
    while heap:
        _, _, i, frm, to = heapq.heappop(heap)
        if alloc[i] != frm:
            continue  # stale entry
        need = (to - frm) * jobs[i].replica_gpus
        if need > capacity:
            push(i)  # capacity shrank since: the best chunk that still fits
            continue
        alloc[i], capacity = to, capacity - need
        push(i)
    return capacity


def running_ends(running: Iterable[RunningJob], now: float) -> Ends:
    """The :class:`~railgang.daemon.core.model.shadow.Ends` of what runs (expected ends:
    ``RunningJob.expected_end``)."""
    return Ends.of((r.expected_end(now), r.gpus) for r in running)


def wait_for(ends: Ends, free: int, need: int, now: float) -> float:
    """Seconds until ``need`` GPUs are free, from ``free`` now and the GPUs that what runs gives
    back at its expected ends (the EASY shadow, ``Ends.when``; inf when they never are)."""
    return ends.when(free, need, now)[0] - now


def pays_without_growth(job: Job, small: int, target: int, wait_s: float) -> bool:
    """Starting at ``small`` now and *never* growing still finishes before waiting ``wait_s`` for
    ``target``. The growth that :func:`start_small_pays` counts on is not a promise the cluster
    keeps: measured, 308 of 317 regrowths that had the free GPUs by count failed to place (the
    added replicas must form a gang of their own on a busy, fragmented cluster), and jobs started
    small ran a time-integrated 6,600 GPU-h short on the synthetic check (issue 12 part 4).
    Unknown work: :func:`start_small_pays`."""
    if small >= target:
        return True
    work = job.work_remaining_s
    if work is None:
        return start_small_pays(job, small, target, wait_s)
    if job.rate(small) <= 0 or wastes_gpus(job, small, target):
        return False
    return work / job.rate(small) < wait_s + work / job.rate(target)


def lowest_start(job: Job, target: int, wait_s: float, node_gpus: int = 0) -> int:
    """The fewest replicas to accept for ``job`` (``target`` when none): the smallest size from
    :func:`smallest_start` up whose run at that size alone beats waiting ``wait_s`` for
    ``target`` (:func:`pays_without_growth`)."""
    lo = smallest_start(job, target, node_gpus=node_gpus)
    for k in sizes(job):
        if lo <= k < target and pays_without_growth(job, k, target, wait_s):
            return k
    return target


def default_target(run: RunningJob) -> int:
    """Without a goodput model, an elastic job wants its maximum (growth is gated by rules)."""
    return run.job.max_replicas


__all__ = [
    "ElasticRules",
    "completion_if_small",
    "default_target",
    "fill_by_chunks",
    "fill_by_marginal_gain",
    "lowest_start",
    "marginal_gain",
    "outlasts_notice",
    "pays_without_growth",
    "resize_pays",
    "running_ends",
    "short_classes",
    "shrink_assignment",
    "shrink_pays",
    "sizes",
    "smallest_start",
    "spans_nodes",
    "start_size",
    "start_small_pays",
    "wait_for",
    "wastes_gpus",
]
