"""Heterogeneity-aware allocation (DESIGN R-S10, issue 13): GPU pools, per-type speed, and where a
job runs relatively fastest.

A *pool* is the set of usable nodes with one GPU type and one capacity tier (``Node.facts.gpu_type``,
``Node.tier``); a gang never spans pools (a job runs at the pace of its slowest GPU, and a mixed
ring all-reduce is as slow as its slowest link), so every placement on a cluster of more than one
pool is asked for on one pool's nodes at a time (``GangRequest.nodes``). A cluster of one pool
takes none of these paths: its schedules are exactly those of a cluster without types.

Speed of a job on a type, :func:`type_rate`: the job's measured rate (``JobRequest.type_rates``,
relative to the type its work is counted in) when known, else :data:`TYPE_SPEED`.

Allocation, Gavel-style but event-driven (:func:`aware` fills ``Want.pools``):

1. The jobs the plan will serve now are the prefix of its order whose GPUs fit in the free GPUs.
2. They are ranked by their *advantage*, the rate on the cluster's fastest type over the rate on
   its slowest: a ResNet that runs 10× faster on a V100 than on a K80 gains more from a V100 than
   an LSTM that runs 3× faster, and the LSTM loses less on the K80 (what the others lose is
   weighed by giving the fast GPUs to the largest ratios first).
3. In that rank the free GPUs are handed out fastest type first: that type is the job's *home*,
   unless it is slower than the job's own fastest type and waiting for that one (its expected
   ends, including the claims of the jobs ranked before) would end sooner: a 1,000-hour job does
   not start on a K80 that would take it 5,000 hours while the V100s free up in a day. Jobs
   beyond the prefix, and jobs that wait, are homed on their own fastest type.
4. A job tries its home, then the other types fastest first; one slower than its home only if
   running there now ends no later than waiting for the home pool (:func:`elsewhere_pays`). Within one type, tiers go cheapest effective cost first
   (``spot.effective_usd_per_gpu_h``); spot is skipped when the job's predicted interruptions
   make it dearer than on-demand or exceed the daily cap (``spot.SpotRules``).

Fairness in effective throughput: the simulator counts attained service as GPU-seconds × rate on
the type / rate on the job's fastest type, so a K80 hour weighs what it is worth to that job in
the Tiresias queues and in ρ (Gavel's normalised effective throughput).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from railgang.daemon.core.model import tiers as spot
from railgang.daemon.core.model.job import Job, JobRequest, RunningJob
from railgang.daemon.core.model.plan import Plan, Want
from railgang.daemon.core.model.pool_map import PoolKey, Pools, pools_of_nodes
from railgang.daemon.core.model.shadow import Ends
from railgang.daemon.core.model.snapshot import (
    Snapshot,
)
from railgang.topology.gpus import GPU_TYPES

RESTART_S = 60.0  # requeue + launch of a moved job, on top of its checkpoint and restore

# Fallback speeds relative to a V100 for jobs without measured per-type rates: the GPU
# catalogue's (topology/gpus.py says where each figure comes from)
TYPE_SPEED: Mapping[str, float] = MappingProxyType({n: t.speed for n, t in GPU_TYPES.items()})


def type_rate(request: JobRequest | Job, gpu_type: str) -> float:
    """Speed of the job on ``gpu_type`` relative to the type its work is counted in."""
    rates = request.type_rates
    if rates:
        known = rates.get(gpu_type)
        if known is not None:
            return known
    return TYPE_SPEED.get(gpu_type, 1.0)


def pools_of(snapshot: Snapshot) -> Pools:
    """Group the usable nodes into pools (sorted keys: deterministic); the snapshot's index
    gives them when its backend keeps them (``SnapshotIndex``)."""
    return snapshot.index.pools


def running_ends(snapshot: Snapshot, pools: Pools, now: float) -> dict[PoolKey, Ends]:
    """The expected ends of the running jobs per pool, at their speed on the pool's type."""
    out: dict[PoolKey, list[tuple[float, int]]] = {}
    for run in snapshot.running.values():
        at = pool_of_run(pools, run)
        if at is None:
            continue
        left = run.remaining_at(now)
        rate = max(type_rate(run.job, at[0]), 1e-9)
        out.setdefault(at, []).append((now + left / rate if left is not None else float("inf"), run.gpus))
    return {key: Ends.of(holders) for key, holders in out.items()}


def pool_of_run(pools: Pools, run: RunningJob) -> PoolKey | None:
    """The pool a running job holds GPUs in (its first node's: a gang never spans pools)."""
    for node in run.assignment:
        return pools.of_node.get(node)
    return None


def advantage(job: Job, types: Iterable[str]) -> float:
    """Rate on the fastest of ``types`` over the rate on the slowest, for this job."""
    rates = [type_rate(job, t) for t in types]
    slow = min(rates)
    return max(rates) / slow if slow > 0 else float("inf")


def _type_order(pools: Pools, jobs: Iterable[Job]) -> list[str]:
    """GPU types of the cluster, fastest first by the mean rate of ``jobs`` (table if none)."""
    jobs = list(jobs)
    def speed(t: str) -> float:
        if not jobs:
            return TYPE_SPEED.get(t, 1.0)
        return sum(type_rate(j, t) for j in jobs) / len(jobs)
    return sorted(pools.types, key=lambda t: (-speed(t), t))


def _run_ends(snapshot: Snapshot, pools: Pools) -> dict[str, list[tuple[float, int]]]:
    """(expected end, GPUs) of the running jobs per GPU type, at their speed on it."""
    ends: dict[str, list[tuple[float, int]]] = {t: [] for t in pools.types}
    for run in snapshot.running.values():
        key = pool_of_run(pools, run)
        if key is None or key[0] not in ends:
            continue
        left = run.remaining_at(snapshot.now)
        rate = max(type_rate(run.job, key[0]), 1e-9)
        ends[key[0]].append((snapshot.now + left / rate if left is not None else float("inf"), run.gpus))
    return ends


def move_cost_s(job: Job) -> float:
    """Expected cost of moving ``job`` later: checkpoint, restore, restart, half an interval."""
    return (job.checkpoint_cost_s + job.restore_cost_s + RESTART_S
            + job.checkpoint_interval_s / 2)


def slower_pays(job: Job, left: float | None, r_there: float, r_best: float,
                 wait_best_s: float) -> bool:
    """Start at ``r_there`` now rather than wait ``wait_best_s`` for ``r_best``? Yes if it ends
    no later, or if the work done meanwhile (in fast seconds) beats the cost of moving to the
    fast pool once it frees (the upgrade phase moves it then)."""
    if r_there >= r_best:
        return True
    if left is None:
        return r_there >= 0.5 * r_best  # no estimate: accept at most half speed
    if left / max(r_there, 1e-9) <= wait_best_s + left / r_best:
        return True
    return wait_best_s * r_there / r_best >= move_cost_s(job)


def homes(snapshot: Snapshot, order: Iterable[Want], pools: Pools,
          free: Mapping[str, frozenset[int]]) -> dict[str, str]:
    """Home GPU type per pending job (steps 1-3 of the module docstring)."""
    jobs = {j.job_id: j for j in snapshot.pending}
    wants = [x for x in order if x.job_id in jobs]
    types = _type_order(pools, (jobs[x.job_id] for x in wants))
    room = {t: 0 for t in types}
    for key, names in pools.nodes.items():
        room[key[0]] += sum(len(free.get(n, ())) for n in names)
    left, served = sum(room.values()), []
    for x in wants:  # 1. the prefix the free GPUs can serve
        need = x.min_replicas * jobs[x.job_id].replica_gpus
        if need > left:
            break
        left -= need
        served.append(x)
    best = {x.job_id: max(types, key=lambda t: (type_rate(jobs[x.job_id], t), t)) for x in wants}
    out = dict(best)
    ends = _run_ends(snapshot, pools)
    ranked = sorted(served, key=lambda x: (-advantage(jobs[x.job_id], types), x.job_id))  # 2.
    for x in ranked:  # 3. fastest type with room, in advantage order, if not waiting pays more
        job = jobs[x.job_id]
        need = x.replicas * job.replica_gpus
        work = job.remaining_at(x.replicas)
        b = best[x.job_id]
        wait_b = Ends.of(ends[b]).when(room[b], need, snapshot.now)[0] - snapshot.now
        for t in types:
            if room[t] < need:
                continue
            if t != b and not slower_pays(job, work, type_rate(job, t), type_rate(job, b), wait_b):
                continue
            room[t] -= need
            end = snapshot.now + (work / max(type_rate(job, t), 1e-9) if work is not None else float("inf"))
            ends[t].append((end, need))  # the next jobs see this claim when they weigh waiting
            out[x.job_id] = t
            break
    return out


def tier_order(job: Job, gpu_type: str, pools: Pools, snapshot: Snapshot,
               rules: spot.SpotRules) -> list[PoolKey]:
    """The pools of ``gpu_type`` the job may use, cheapest effective cost first."""
    keys = [k for k in pools.nodes if k[0] == gpu_type]
    priced = []
    for key in keys:
        nodes = -(-job.gpus // max(1, pools.node_gpus[key]))
        if not rules.allows(job, key, nodes, snapshot.tiers):
            continue
        priced.append((spot.effective_usd_per_gpu_h(job, key, nodes, snapshot.tiers), key))
    return [k for _, k in sorted(priced)]


def aware(plan: Plan, snapshot: Snapshot, rules: spot.SpotRules = spot.SpotRules()) -> Plan:
    """``plan`` with each pending job's pools filled in, best first (no-op on one pool)."""
    pools = pools_of(snapshot)
    if not pools.mixed:
        return plan
    jobs = {j.job_id: j for j in snapshot.pending}
    home = homes(snapshot, plan.order, pools, snapshot.free)
    types = pools.types
    order = []
    for x in plan.order:
        job = jobs.get(x.job_id)
        if job is None:
            order.append(x)
            continue
        by_speed = sorted(types, key=lambda t: (t != home[x.job_id], -type_rate(job, t), t))
        keys = tuple(k for t in by_speed for k in tier_order(job, t, pools, snapshot, rules))
        order.append(x._replace(pools=keys))
    return dataclasses.replace(plan, order=tuple(order), hetero=True)


__all__ = [
    "RESTART_S",
    "TYPE_SPEED",
    "PoolKey",
    "Pools",
    "advantage",
    "aware",
    "homes",
    "move_cost_s",
    "pool_of_run",
    "pools_of",
    "pools_of_nodes",
    "running_ends",
    "slower_pays",
    "tier_order",
    "type_rate",
]
