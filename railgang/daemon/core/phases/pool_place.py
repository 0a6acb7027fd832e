"""Placement on a cluster of several GPU pools, one pool at a time (``model/pools.py`` says why a
gang never spans pools and how a job's home pool is chosen): the start, grow and backfill
helpers the place and size phases call. A cluster of one pool takes none of these paths.
"""

from __future__ import annotations

from railgang.daemon.core.model.gang import Placed, Unplaceable, gang_for
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.model.pools import (
    PoolKey,
    Pools,
    pool_of_run,
    slower_pays,
    type_rate,
)
from railgang.daemon.core.model.shadow import NO_ENDS
from railgang.daemon.core.phases.draft import Draft
from railgang.topology.placement.types import PlacementFailure


def pool_shadow(d: Draft, pools: Pools, key: PoolKey, need: int) -> float:
    """When ``need`` GPUs of pool ``key`` are free by its running jobs' expected ends (at their
    speed on the pool's type); inf if never."""
    names = pools.nodes.get(key, frozenset())
    avail = sum(len(g) for n, g in d.free.items() if n in names)
    return d.pool_ends.get(key, NO_ENDS).when(avail, need, d.now)[0]


def elsewhere_pays(d: Draft, pools: Pools, job: Job, gpus: int, home: PoolKey, there: PoolKey) -> bool:
    """Run on the slower pool ``there`` now only if that ends no later than waiting for ``home``."""
    r_home, r_there = type_rate(job, home[0]), type_rate(job, there[0])
    if r_there >= r_home:
        return True
    wait = pool_shadow(d, pools, home, gpus) - d.now
    return slower_pays(job, job.remaining_at(job.replicas), r_there, r_home, wait)


def eligible_in(d: Draft, job: Job, names: frozenset[str]) -> frozenset[str]:
    eligible = d.eligible(job)
    return names if eligible is None else names & eligible


def place(d: Draft, job: Job, want: Want, replicas: int,
          avoid: frozenset[str] = frozenset()) -> Placed | Unplaceable:
    """Place ``replicas`` of ``job`` on one pool: the plan's pools in order (type-blind: the pool
    with the most free GPUs first); on a one-pool cluster exactly the plain placement. ``avoid``:
    nodes it may not use (a backfill job that would outlast the reservation on them)."""
    pools = d.pools
    if not pools.mixed:
        nodes = d.eligible(job)
        if avoid:
            nodes = (frozenset(d.snap.nodes) if nodes is None else nodes) - avoid
        return d.place(gang_for(job, replicas, nodes))
    gpus = replicas * job.replica_gpus
    if want.pools:
        order = list(want.pools)
    else:
        free = {k: sum(len(d.free.get(n, ())) for n in names) for k, names in pools.nodes.items()}
        order = sorted(pools.nodes, key=lambda k: (-free[k], k))
    failure: Unplaceable | None = None
    home = order[0] if want.pools else None
    for key in order:
        names = pools.nodes.get(key)
        if not names:
            continue
        if home is not None and not elsewhere_pays(d, pools, job, gpus, home, key):
            continue  # waiting for the home pool ends sooner
        res = d.place(gang_for(job, replicas, eligible_in(d, job, names) - avoid))
        if isinstance(res, Placed):
            return res
        if failure is None or res.code.about_the_request or failure.code is PlacementFailure.INELIGIBLE_NODES:
            failure = res
    if failure is None or failure.code is PlacementFailure.INELIGIBLE_NODES:
        eligible = d.eligible(job)
        if eligible is not None:  # a job with needs: say so when they are what rules it out
            have = sum(len(g) for n, g in d.free.items() if n in eligible)
            if have < gpus <= d.free_count:
                return Unplaceable(PlacementFailure.INELIGIBLE_NODES,
                                   f"{d.free_count} GPUs free, {have} of them on "
                                   f"{job.needs.on().removeprefix('the ')}, {gpus} needed")
        return Unplaceable(PlacementFailure.INSUFFICIENT_GPUS,
                           f"no pool has {gpus} free GPUs the job may use")
    return failure


def nodes_for(d: Draft, job: Job, want: Want) -> frozenset[str] | None:
    """Nodes an eviction what-if may place ``job`` on: its first pool (the largest one when
    type-blind) on a mixed cluster, else the nodes meeting its needs."""
    pools = d.pools
    if not pools.mixed:
        return d.eligible(job)
    key = want.pools[0] if want.pools else max(pools.nodes, key=lambda k: (pools.gpus[k], k))
    return eligible_in(d, job, pools.nodes[key])


def grow_nodes(d: Draft, run: RunningJob) -> frozenset[str] | None:
    """Nodes a growing job may add replicas on: its own pool's (a gang never spans pools)."""
    pools = d.pools
    if not pools.mixed:
        return d.eligible(run.job)
    key = pool_of_run(pools, run)
    return eligible_in(d, run.job, pools.nodes.get(key, frozenset()) if key else frozenset())


__all__ = ["eligible_in", "elsewhere_pays", "grow_nodes", "nodes_for", "place", "pool_shadow"]
