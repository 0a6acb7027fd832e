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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from railgang.daemon.core import preemption as pre
from railgang.daemon.core import spot
from railgang.daemon.core.actions import Migrate
from railgang.daemon.core.gang import Placed, Unplaceable, gang_for
from railgang.daemon.core.job import Job, JobRequest, RunningJob
from railgang.daemon.core.policy import Plan, Want
from railgang.daemon.core.snapshot import Snapshot
from railgang.topology.placement.types import PlacementFailure

if TYPE_CHECKING:
    from railgang.daemon.core.work import Work

PoolKey = tuple[str, str]  # (GPU type, tier)
_FILLED: PoolKey = ("\0", "\0")  # no GPU type is called NUL: Pools.ends is built

# Fallback speeds relative to a V100 (1.0) for jobs without measured per-type rates. K80 and P100:
# the median ratio over the (model, size) pairs Gavel measured on both (simulation_throughputs.json:
# K80 0.21 of 80 pairs, P100 0.76 of 83); newer types: vendor training throughput ratios, rounded.
TYPE_SPEED: Mapping[str, float] = {
    "k80": 0.21, "t4": 0.45, "p100": 0.76, "v100": 1.0, "a10": 0.9, "l4": 0.6,
    "a100": 2.0, "l40s": 1.6, "h100": 3.5, "h200": 4.0, "b200": 7.0,
}


def type_rate(request: JobRequest | Job, gpu_type: str) -> float:
    """Speed of the job on ``gpu_type`` relative to the type its work is counted in."""
    rates = request.type_rates
    if rates:
        known = rates.get(gpu_type)
        if known is not None:
            return known
    return TYPE_SPEED.get(gpu_type, 1.0)


@dataclass(frozen=True)
class Pools:
    """The pools of one snapshot: nodes, GPUs and the largest node per (type, tier)."""

    nodes: Mapping[PoolKey, frozenset[str]]
    gpus: Mapping[PoolKey, int]
    node_gpus: Mapping[PoolKey, int]
    of_node: Mapping[str, PoolKey]
    # (expected end, GPUs) of the running jobs per pool, sorted; filled on first use (the
    # running jobs do not change within one cycle)
    ends: dict[PoolKey, list[tuple[float, int]]] = dataclasses.field(default_factory=dict)

    @property
    def mixed(self) -> bool:
        return len(self.nodes) > 1

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(sorted({t for t, _ in self.nodes}))


def pools_of(snapshot: Snapshot) -> Pools:
    """Group the usable nodes into pools (sorted keys: deterministic).

    Memoised on the nodes (a pure function of them; the last answer is kept): a replay asks
    three times per cycle for the same nodes, cycle after cycle (issue 12, speed). The grouping
    is shared, read only; each call gets its own per-cycle ``ends`` cache."""
    items = tuple(snapshot.nodes.items())
    hit = _POOLS_MEMO.get("last")
    if hit is not None and hit[0] == items:  # equal nodes (identical ones compare at once)
        p = hit[1]
        return Pools(p.nodes, p.gpus, p.node_gpus, p.of_node)
    pools = _pools_of(snapshot)
    _POOLS_MEMO["last"] = (items, pools)
    return Pools(pools.nodes, pools.gpus, pools.node_gpus, pools.of_node)


_POOLS_MEMO: dict[str, tuple[tuple[tuple[str, object], ...], Pools]] = {}


def _pools_of(snapshot: Snapshot) -> Pools:
    nodes: dict[PoolKey, set[str]] = {}
    gpus: dict[PoolKey, int] = {}
    biggest: dict[PoolKey, int] = {}
    of_node: dict[str, PoolKey] = {}
    for name, node in snapshot.nodes.items():
        key = (node.facts.gpu_type, node.tier)
        of_node[name] = key
        if not node.state.usable:
            continue
        nodes.setdefault(key, set()).add(name)
        gpus[key] = gpus.get(key, 0) + node.gpus
        biggest[key] = max(biggest.get(key, 0), node.gpus)
    return Pools({k: frozenset(v) for k, v in sorted(nodes.items())}, gpus, biggest, of_node)


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


def shadow(now: float, avail: int, ends: Iterable[tuple[float, int]], need: int) -> float:
    """When ``need`` GPUs are free, from ``avail`` free now and (end, GPUs) of the holders."""
    if avail >= need:
        return now
    for end, g in sorted(ends):
        avail += g
        if avail >= need:
            return end
    return float("inf")


def _run_ends(snapshot: Snapshot, pools: Pools) -> dict[str, list[tuple[float, int]]]:
    """(expected end, GPUs) of the running jobs per GPU type, at their speed on it."""
    ends: dict[str, list[tuple[float, int]]] = {t: [] for t in pools.types}
    for run in snapshot.running.values():
        key = pool_of_run(pools, run)
        if key is None or key[0] not in ends:
            continue
        left = run.job.remaining_at(run.replicas)
        rate = max(type_rate(run.job, key[0]), 1e-9)
        ends[key[0]].append((snapshot.now + left / rate if left is not None else float("inf"), run.gpus))
    return ends


def move_cost_s(job: Job) -> float:
    """Expected cost of moving ``job`` later: checkpoint, restore, restart, half an interval."""
    return (job.checkpoint_cost_s + job.restore_cost_s + UpgradeRules.restart_s
            + job.checkpoint_interval_s / 2)


def _slower_pays(job: Job, left: float | None, r_there: float, r_best: float,
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
        wait_b = shadow(snapshot.now, room[b], ends[b], need) - snapshot.now
        for t in types:
            if room[t] < need:
                continue
            if t != b and not _slower_pays(job, work, type_rate(job, t), type_rate(job, b), wait_b):
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
        order.append(dataclasses.replace(x, pools=keys))
    return dataclasses.replace(plan, order=tuple(order), hetero=True)


# -- placement on one pool at a time (called by the cycle's phases) ----------------------------
def pool_shadow(w: Work, pools: Pools, key: PoolKey, need: int) -> float:
    """When ``need`` GPUs of pool ``key`` are free by its running jobs' expected ends (at their
    speed on the pool's type); inf if never."""
    names = pools.nodes.get(key, frozenset())
    avail = sum(len(g) for n, g in w.free.items() if n in names)
    if avail >= need:
        return w.now
    if not pools.ends:
        for run in w.snap.running.values():
            at = pool_of_run(pools, run)
            if at is None:
                continue
            left = run.job.remaining_at(run.replicas)
            rate = max(type_rate(run.job, at[0]), 1e-9)
            pools.ends.setdefault(at, []).append(
                (w.now + left / rate if left is not None else float("inf"), run.gpus))
        for ends in pools.ends.values():
            ends.sort()
        pools.ends.setdefault(_FILLED, [])  # marks the cache filled even with nothing running
    return shadow(w.now, avail, pools.ends.get(key, ()), need)


def elsewhere_pays(w: Work, pools: Pools, job: Job, gpus: int, home: PoolKey, there: PoolKey) -> bool:
    """Run on the slower pool ``there`` now only if that ends no later than waiting for ``home``."""
    r_home, r_there = type_rate(job, home[0]), type_rate(job, there[0])
    if r_there >= r_home:
        return True
    wait = pool_shadow(w, pools, home, gpus) - w.now
    return _slower_pays(job, job.remaining_at(job.replicas), r_there, r_home, wait)


def _nodes(w: Work, job: Job, names: frozenset[str]) -> frozenset[str]:
    eligible = w.eligible(job)
    return names if eligible is None else names & eligible


def place(w: Work, job: Job, want: Want, replicas: int,
          avoid: frozenset[str] = frozenset()) -> Placed | Unplaceable:
    """Place ``replicas`` of ``job`` on one pool: the plan's pools in order (type-blind: the pool
    with the most free GPUs first); on a one-pool cluster exactly the plain placement. ``avoid``:
    nodes it may not use (a backfill job that would outlast the reservation on them)."""
    pools = w.pools
    if not pools.mixed:
        nodes = w.eligible(job)
        if avoid:
            nodes = (frozenset(w.snap.nodes) if nodes is None else nodes) - avoid
        return w.place(gang_for(job, replicas, nodes))
    gpus = replicas * job.replica_gpus
    if want.pools:
        order = list(want.pools)
    else:
        free = {k: sum(len(w.free.get(n, ())) for n in names) for k, names in pools.nodes.items()}
        order = sorted(pools.nodes, key=lambda k: (-free[k], k))
    failure: Unplaceable | None = None
    home = order[0] if want.pools else None
    for key in order:
        names = pools.nodes.get(key)
        if not names:
            continue
        if home is not None and not elsewhere_pays(w, pools, job, gpus, home, key):
            continue  # waiting for the home pool ends sooner
        res = w.place(gang_for(job, replicas, _nodes(w, job, names) - avoid))
        if isinstance(res, Placed):
            return res
        if failure is None or res.code.about_the_request or failure.code is PlacementFailure.INELIGIBLE_NODES:
            failure = res
    if failure is None or failure.code is PlacementFailure.INELIGIBLE_NODES:
        eligible = w.eligible(job)
        if eligible is not None:  # a job with needs: say so when they are what rules it out
            have = sum(len(g) for n, g in w.free.items() if n in eligible)
            if have < gpus <= w.free_count:
                return Unplaceable(PlacementFailure.INELIGIBLE_NODES,
                                   f"{w.free_count} GPUs free, {have} of them on nodes that meet "
                                   f"{job.needs.render()}, {gpus} needed")
        return Unplaceable(PlacementFailure.INSUFFICIENT_GPUS,
                           f"no pool has {gpus} free GPUs the job may use")
    return failure


def nodes_for(w: Work, job: Job, want: Want) -> frozenset[str] | None:
    """Nodes an eviction what-if may place ``job`` on: its first pool (the largest one when
    type-blind) on a mixed cluster, else the nodes meeting its needs."""
    pools = w.pools
    if not pools.mixed:
        return w.eligible(job)
    key = want.pools[0] if want.pools else max(pools.nodes, key=lambda k: (pools.gpus[k], k))
    return _nodes(w, job, pools.nodes[key])


def grow_nodes(w: Work, run: RunningJob) -> frozenset[str] | None:
    """Nodes a growing job may add replicas on: its own pool's (a gang never spans pools)."""
    pools = w.pools
    if not pools.mixed:
        return w.eligible(run.job)
    key = pool_of_run(pools, run)
    return _nodes(w, run.job, pools.nodes.get(key, frozenset()) if key else frozenset())


# -- upgrades: move running work onto faster GPUs left idle (Gavel's rounds move jobs for free) --
@dataclass(frozen=True)
class UpgradeRules:
    """When a running job moves to a faster pool whose GPUs nobody else took this cycle."""

    enabled: bool = True
    margin: float = 1.5  # time saved must be at least margin × the move's cost
    restart_s: float = 60.0  # requeue + launch, on top of the job's checkpoint and restore
    max_per_cycle: int = 4
    spot_rules: spot.SpotRules = dataclasses.field(default_factory=spot.SpotRules)  # onto spot


def upgrade_phase(w: Work, plan: Plan, rules: UpgradeRules, budget: pre.PreemptionBudget) -> None:
    """Emit ``Migrate`` for running jobs that finish sooner on a faster pool's idle GPUs.

    Runs after placement, so the free GPUs left are ones no waiting job would take. A job on pool
    Q moves to pool P when ``W/r_Q - (W/r_P + C) >= margin × C`` (W: work left in reference
    seconds, C: checkpoint + restore + restart + the work since its last checkpoint), largest
    saving first, within the preemption budget (class 0 never, a job at most once per interval,
    the churn window's cap). Before any upgrade, a job on spot that ``SpotRules`` would refuse on
    the nodes it holds (a gang scattered over more nodes than routing counted is reclaimed more
    often) moves to free non-spot GPUs of a type at least as fast (``_off_spot``)."""
    pools = w.pools
    if not rules.enabled or not plan.hetero or not pools.mixed or w.free_count <= 0:
        return
    snap, now = w.snap, w.now
    churn = pre.churned_gpus(snap, now, budget.churn_window_s) + sum(
        getattr(a, "gpus", 0) for a in w.preempts)
    cap = pre.churn_cap_gpus(snap, budget)
    cands = _off_spot(w, pools, rules, budget, now)  # leaving spot first: it is a cost, not a gain
    for run in snap.running.values():
        key = pool_of_run(pools, run)
        left = run.job.remaining_at(run.replicas)
        if (key is None or left is None or run.preempt_deadline is not None or run.job_id in w.touched
                or run.priority_class == 0
                or pre.recently_preempted(run.job.last_preempted_at, now, budget.job_min_interval_s)):
            continue
        r_here = max(type_rate(run.job, key[0]), 1e-9)
        cost = (run.job.checkpoint_cost_s + run.job.restore_cost_s + rules.restart_s
                + run.work_since_checkpoint_s(now))
        for there in pools.nodes:
            r_there = type_rate(run.job, there[0])
            if there == key or r_there <= r_here:
                continue
            nodes = -(-run.gpus // max(1, pools.node_gpus[there]))
            if not rules.spot_rules.allows(run.job, there, nodes, snap.tiers):
                continue  # never onto spot that routing would refuse it
            saving = left / r_here - (left / r_there + cost)
            if saving >= rules.margin * cost:
                cands.append(((1.0, -saving), run.job_id, there, run))
    moved = 0
    for _, _, there, run in sorted(cands, key=lambda c: (c[0], c[1], c[2])):
        if moved >= rules.max_per_cycle:
            break
        if run.job_id in w.touched or (churn > 0 and churn + run.gpus > cap):
            continue
        placed = w.place(gang_for(run.job, run.replicas, _nodes(w, run.job, pools.nodes[there])))
        if not isinstance(placed, Placed):
            continue
        w.take(placed.assignment)
        w.preempts.append(Migrate(run.job_id, pre.grace_for(run, budget), placed.assignment,
                                  run.replicas, gpus=run.gpus))
        w.touched.add(run.job_id)
        churn += run.gpus
        moved += 1


def _off_spot(w: Work, pools: Pools, rules: UpgradeRules, budget: pre.PreemptionBudget,
              now: float) -> list[tuple[tuple[float, ...], str, PoolKey, RunningJob]]:
    """Moves off spot (issue 13 part 3): a running job whose spot pool ``SpotRules`` would now
    refuse it, on the nodes it actually holds (a scattered gang is reclaimed once per node), goes
    to a non-spot pool of a type at least as fast, most predicted interruptions first."""
    snap = w.snap
    out: list[tuple[tuple[float, ...], str, PoolKey, RunningJob]] = []
    for run in snap.running.values():
        key = pool_of_run(pools, run)
        if (key is None or key[1] != spot.SPOT or run.preempt_deadline is not None
                or run.job_id in w.touched or run.priority_class == 0
                or pre.recently_preempted(run.job.last_preempted_at, now, budget.job_min_interval_s)):
            continue
        terms = snap.tiers.get(spot.SPOT)
        if terms is None or rules.spot_rules.allows(run.job, key, len(run.assignment), snap.tiers):
            continue
        left = run.job.remaining_at(run.replicas)
        if left is not None and left <= move_cost_s(run.job):
            continue  # ends before the move would pay for itself
        r_here = type_rate(run.job, key[0])
        per_day = spot.interruptions_per_day(run.job, len(run.assignment), terms)
        for there in pools.nodes:
            if there[1] != spot.SPOT and (there[0] == key[0] or type_rate(run.job, there[0]) >= r_here):
                # before any upgrade; most interruptions first; its own type before faster ones
                out.append(((0, -per_day, 0 if there[0] == key[0] else 1), run.job_id, there, run))
    return out


__all__ = [
    "TYPE_SPEED",
    "PoolKey",
    "Pools",
    "UpgradeRules",
    "advantage",
    "aware",
    "elsewhere_pays",
    "grow_nodes",
    "homes",
    "nodes_for",
    "place",
    "pool_of_run",
    "pool_shadow",
    "pools_of",
    "tier_order",
    "type_rate",
    "upgrade_phase",
]
