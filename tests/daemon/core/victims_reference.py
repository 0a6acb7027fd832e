"""The four victim searches ``model/victims.py`` replaced, kept verbatim (from 1c400e8) as the
reference of ``test_victims.py``'s property test: the solver must find victims wherever they did,
at no higher cost. Test-only: nothing in the daemon imports this module."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from railgang.daemon.core.model import elastic
from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model import quota as q
from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import Assignment, Job, RunningJob, gpu_count
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.phases.defrag import DefragRules
from railgang.daemon.core.phases.draft import Draft
from railgang.daemon.core.phases.evict_domain import lost_gpu_h
from railgang.daemon.core.phases.migrate import MigrationRules, move_cost_s
from railgang.daemon.core.phases.pool_place import nodes_for

_Shrink = tuple[RunningJob, Assignment, Assignment]


# -- evict.py: node by node ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Eviction:
    placed: Placed | None = None
    shrinks: tuple[_Shrink, ...] = ()
    kills: tuple[RunningJob, ...] = ()
    budget_hit: bool = False


def _evict_for(
    d: Draft, job: Job, x: Want, cands: list[RunningJob], gpus_of: Mapping[str, int],
    budget: pre.PreemptionBudget, churn: int, cap: int, rules: elastic.ElasticRules,
) -> Eviction:
    """The first victim set (shrinks first, then whole jobs, in rank order) that lets ``job`` be
    placed."""
    now, need = d.now, x.min_replicas * job.replica_gpus
    shrinks: list[_Shrink] = []
    kills: list[RunningJob] = []
    extra: dict[str, frozenset[int]] = dict(d.free)
    got, killed, budget_hit, tries = d.free_count, 0, False, 0
    # a shrink serves a higher class only: shrinking a peer to its minimum left a deficit that
    # same-class work never gave back (issue 12 part 4); peers are evicted under the budgets
    steps = [(False, v, True) for v in cands if v.priority_class > job.priority_class
             and elastic.shrink_pays(v, v.job.min_replicas, now, rules)]
    room = cap - churn if job.priority_class > 0 else None
    steps += _node_by_node(d, cands, gpus_of, need, room, budget)
    for kill, v, complete in steps:
        if kill:
            if pre.recently_preempted(v.job.last_preempted_at, now, budget.job_min_interval_s):
                budget_hit = True
                continue
            if job.priority_class > 0 and churn + killed + gpus_of[v.job_id] > cap:
                budget_hit = True
                continue
            shrunk = next((s for s in shrinks if s[0].job_id == v.job_id), None)
            gone: Assignment = v.assignment
            if shrunk is not None:
                shrinks.remove(shrunk)
                gone = shrunk[1]  # the part the shrink would have kept goes too
            kills.append(v)
            killed += gpus_of[v.job_id]
        else:
            kept, gone = elastic.shrink_assignment(v, v.job.min_replicas)
            shrinks.append((v, kept, gone))
        for n, gs in gone.items():
            extra[n] = extra.get(n, frozenset()) | frozenset(gs)
            got += len(gs)
        if got >= need and complete and tries < 4:
            tries += 1
            placed = d.place(gang_for(job, x.min_replicas, nodes_for(d, job, x)), extra)
            if isinstance(placed, Placed):
                return Eviction(placed, tuple(shrinks), tuple(kills))
    return Eviction(budget_hit=budget_hit)


def _node_by_node(d: Draft, cands: list[RunningJob], gpus_of: Mapping[str, int], need: int,
                  room: int | None, budget: pre.PreemptionBudget,
                  ) -> list[tuple[bool, RunningJob, bool]]:
    """Kill steps ``(True, victim, complete)``, node by node (``preemption`` module docstring):
    for each node, the victims (in rank order) whose GPUs there, with its free ones, make
    ``min(need, node GPUs)``; nodes whose worst needed victim ranks best come first (then fewest
    GPUs killed, then name), and ``complete`` marks the last victim of a node, where a placement
    is tried. Victims taken one by one in rank order alone scatter over the nodes: on a full
    cluster of 1-GPU jobs an 8-GPU gang then killed up to the churn cap without ever emptying a
    node (Philly, issue 12 part 5). The rest of the candidates follow in rank order."""
    now = d.now
    on: dict[str, list[RunningJob]] = {}
    for v in cands:
        if not pre.recently_preempted(v.job.last_preempted_at, now, budget.job_min_interval_s):
            for n, gs in v.assignment.items():
                if gs:
                    on.setdefault(n, []).append(v)
    rank = {v.job_id: i for i, v in enumerate(cands)}
    plans: list[tuple[int, int, str, list[RunningJob]]] = []
    for n, victims in on.items():
        target, have = min(need, d.snap.nodes[n].gpus), len(d.free.get(n, ()))
        taken: list[RunningJob] = []
        cost = 0
        for v in victims:
            if have >= target:
                break
            taken.append(v)
            have += len(v.assignment[n])
            cost += gpus_of[v.job_id]
        if taken and have >= target and (room is None or cost <= room):
            plans.append((rank[taken[-1].job_id], cost, n, taken))
    steps: list[tuple[bool, RunningJob, bool]] = []
    seen: set[str] = set()
    for *_, taken in sorted(plans, key=lambda p: p[:3]):
        group = [v for v in taken if v.job_id not in seen]
        seen.update(v.job_id for v in group)
        steps += [(True, v, i == len(group) - 1) for i, v in enumerate(group)]
    steps += [(True, v, True) for v in cands if v.job_id not in seen]
    return steps


# -- evict_domain.py: one leaf, or whole leaves ---------------------------------------------------

_TRIES = 4  # placement searches per waiting gang (each is a full topology search)


@dataclass(frozen=True, slots=True)
class DomainEviction:
    """What the search found: where the gang goes and whom that costs, or nothing."""

    placed: Placed | None = None
    kills: tuple[RunningJob, ...] = ()
    leaves: tuple[str, ...] = ()  # the leaves the gang's placement uses
    lost_gpu_h: float = 0.0
    budget_hit: bool = False  # a budget ruled out a victim or a leaf that might have helped


@dataclass
class _Leaf:
    name: str
    order: int
    nodes: frozenset[str]
    cap: int  # GPUs of its usable nodes the gang may use
    free: int
    victims: list[tuple[RunningJob, int]]  # (victim, its GPUs in this leaf)


def _leaves(d: Draft, allowed: frozenset[str] | None, cands: Sequence[RunningJob]) -> list[_Leaf]:
    fabric, nodes = d.snap.fabric, d.snap.nodes
    out: list[_Leaf] = []
    where: dict[str, int] = {}
    for i, leaf in enumerate(fabric.leaves):
        members = frozenset(n for n in fabric.direct_nodes(leaf)
                            if n in nodes and nodes[n].state.usable and (allowed is None or n in allowed))
        for n in members:
            where[n] = len(out)
        out.append(_Leaf(leaf, i, members, sum(nodes[n].gpus for n in members),
                         sum(len(d.free.get(n, ())) for n in members), []))
    for v in cands:
        held: dict[int, int] = {}
        for n, gs in v.assignment.items():
            if n in where and gs:
                held[where[n]] = held.get(where[n], 0) + len(gs)
        for k, g in held.items():
            out[k].victims.append((v, g))
    return out


def _pick(leaf: _Leaf, need: int, now: float, rank: Mapping[str, int]) -> list[RunningJob]:
    """Victims of ``leaf``, cheapest per GPU first, until its free GPUs cover ``need``; then the
    dearest of those no longer needed dropped again. Empty if the leaf cannot cover it."""
    order = sorted(leaf.victims, key=lambda vg: (lost_gpu_h(vg[0], now) / vg[1], rank[vg[0].job_id]))
    got, taken = leaf.free, []
    for v, g in order:
        if got >= need:
            break
        taken.append((v, g))
        got += g
    if got < need:
        return []
    for v, g in sorted(taken, key=lambda vg: (-lost_gpu_h(vg[0], now), -rank[vg[0].job_id])):
        if got - g >= need:
            taken.remove((v, g))
            got -= g
    return [v for v, _ in sorted(taken, key=lambda vg: rank[vg[0].job_id])]


def _try(d: Draft, job: Job, x: Want, nodes: frozenset[str], kills: Sequence[RunningJob]) -> Placed | None:
    extra: dict[str, frozenset[int]] = dict(d.free)
    for v in kills:
        for n, gs in v.assignment.items():
            extra[n] = extra.get(n, frozenset()) | frozenset(gs)
    placed = d.place(gang_for(job, x.min_replicas, nodes), extra)
    return placed if isinstance(placed, Placed) else None


def evict_domains(d: Draft, job: Job, x: Want, cands: Sequence[RunningJob],
                  allowed: frozenset[str] | None, budget: pre.PreemptionBudget,
                  room: int | None) -> DomainEviction:
    """The cheapest whole-leaf victim set that lets ``job`` be placed (module docstring)."""
    now, need = d.now, x.min_replicas * job.replica_gpus
    fresh = [v for v in cands if not pre.recently_preempted(v.job.last_preempted_at, now, budget.job_min_interval_s)]
    budget_hit = len(fresh) < len(cands)
    rank = {v.job_id: i for i, v in enumerate(fresh)}
    leaves = _leaves(d, allowed, fresh)
    if need <= max((lf.cap for lf in leaves), default=0):
        found = _one_leaf(d, job, x, leaves, need, rank, room)
    else:
        found = _many_leaves(d, job, x, leaves, need, rank, room)
    if found is None or isinstance(found, bool):
        return DomainEviction(budget_hit=budget_hit or found is True)
    placed, kills = found
    used = set(placed.assignment)
    kills = [v for v in kills if not used.isdisjoint(v.assignment)]
    fabric = d.snap.fabric
    return DomainEviction(placed, tuple(kills), tuple(sorted({fabric.leaf_of(n) for n in used})),
                          sum(lost_gpu_h(v, now) for v in kills), budget_hit)


_Found = tuple[Placed, list[RunningJob]] | bool | None  # found; True: only a budget stood in the way


def _one_leaf(d: Draft, job: Job, x: Want, leaves: list[_Leaf], need: int,
              rank: Mapping[str, int], room: int | None) -> _Found:
    plans: list[tuple[float, int, int, _Leaf, list[RunningJob]]] = []
    hit = False
    for lf in leaves:
        if lf.cap < need:
            continue
        kills = _pick(lf, need, d.now, rank)
        if not kills and lf.free < need:
            continue
        if room is not None and sum(v.gpus for v in kills) > room:
            hit = True
            continue
        plans.append((sum(lost_gpu_h(v, d.now) for v in kills), len(kills), lf.order, lf, kills))
    tries = 0
    for *_, lf, kills in sorted(plans, key=lambda p: p[:3]):
        spare = sorted((v for v, _ in lf.victims if v not in kills), key=lambda v: rank[v.job_id])
        while tries < _TRIES:
            tries += 1
            placed = _try(d, job, x, lf.nodes, kills)
            if placed is not None:
                return placed, kills
            if not spare or (room is not None and sum(v.gpus for v in kills) + spare[0].gpus > room):
                break  # the leaf's GPUs never form the gang's TP groups within the budget
            kills = [*kills, spare.pop(0)]
    return hit or None


def _many_leaves(d: Draft, job: Job, x: Want, leaves: list[_Leaf], need: int,
                 rank: Mapping[str, int], room: int | None) -> _Found:
    """Whole leaves, emptied cheapest per GPU first, until they hold the gang."""
    whole = []
    for lf in leaves:
        if lf.cap == 0:
            continue
        kills = sorted({v.job_id: v for v, _ in lf.victims}.values(), key=lambda v: rank[v.job_id])
        if lf.free + sum(g for _, g in lf.victims) < lf.cap:
            continue  # a job it may not evict stays in it: not a whole leaf
        whole.append((sum(lost_gpu_h(v, d.now) for v in kills) / lf.cap, lf.order, lf, kills))
    got, nodes, chosen = 0, frozenset[str](), {}
    for *_, lf, kills in sorted(whole, key=lambda w: w[:2]):
        if got >= need:
            break
        got += lf.cap
        nodes |= lf.nodes
        chosen.update({v.job_id: v for v in kills})
    if got < need:
        return None
    kills = sorted(chosen.values(), key=lambda v: rank[v.job_id])
    if room is not None and sum(v.gpus for v in kills) > room:
        return True
    placed = _try(d, job, x, nodes, kills)
    return (placed, kills) if placed is not None else None


# -- reclaim.py: borrowed work, newest first ---------------------------------------------------

def reclaim(d: Draft, tree: q.QuotaTree, budget: pre.PreemptionBudget, churn: int, cap: int,
            cands: list[RunningJob], job: Job, x: Want, need: int,
            ) -> tuple[Placed, list[_Shrink], list[RunningJob]] | None:
    """ReclaimPhase._serve's search (its in-flight and cascade checks are the phase's, not here);
    ``cands`` are ReclaimPhase._victims(job)."""
    alloc = dict(d.account_gpus)

    def _allowed(step: tuple[bool, RunningJob], job: Job, killed: int) -> bool:
        kill, v = step
        if not kill:
            return True
        if pre.recently_preempted(v.job.last_preempted_at, d.now, budget.job_min_interval_s):
            return False
        return job.priority_class == 0 or churn + killed + v.gpus <= cap

    extra: dict[str, frozenset[int]] = dict(d.free)
    got = d.free_count
    shrinks: list[tuple[RunningJob, Assignment, Assignment]] = []
    kills: list[RunningJob] = []
    killed = 0
    cands = cands[:64]
    steps = [(False, v) for v in cands if v.replicas > v.job.min_replicas] + \
            [(True, v) for v in cands]
    used: set[tuple[bool, str]] = set()
    placed: Placed | None = None
    tries = 0
    while placed is None:
        block = q.gate(tree, alloc, job.account, need)
        if block is None and got >= need and tries < 4:
            tries += 1
            res = d.place(gang_for(job, x.min_replicas, nodes_for(d, job, x)), extra)
            if isinstance(res, Placed):
                placed = res
                break
        step = next((s for s in steps if (s[0], s[1].job_id) not in used
                     and alloc.get(s[1].job.account, 0) > tree.guaranteed(s[1].job.account)
                     and (block is None or tree.under(s[1].job.account, block.account))
                     and _allowed(s, job, killed)), None)
        if step is None:
            return None
        kill, v = step
        used.add((kill, v.job_id))
        if kill:
            shrunk = next((s for s in shrinks if s[0].job_id == v.job_id), None)
            gone: Assignment = v.assignment
            if shrunk is not None:
                shrinks.remove(shrunk)
                gone = shrunk[1]  # the part the shrink would have kept goes too
            kills.append(v)
            killed += v.gpus
        else:
            kept, gone = elastic.shrink_assignment(v, v.job.min_replicas)
            shrinks.append((v, kept, gone))
        alloc[v.job.account] = alloc.get(v.job.account, 0) - gpu_count(gone)
        for n, gs in gone.items():
            extra[n] = extra.get(n, frozenset()) | frozenset(gs)
        got += gpu_count(gone)
    assert placed is not None
    return placed, shrinks, kills


# -- defrag.py: movers out of one leaf ----------------------------------------------------------

@dataclass(frozen=True)
class _Plan:
    cost_gpu_s: float
    gain_gpu_s: float
    leaf: str
    moves: tuple[tuple[RunningJob, Placed], ...]


def defrag(d: Draft, job: Job, rules: DefragRules, moving: MigrationRules, budget: pre.PreemptionBudget,
           wait: float) -> _Plan | None:
    """defrag._serve's choice of leaf (``wait``: its _natural_wait_s)."""
    fabric, snap, now = d.snap.fabric, d.snap, d.now
    need = job.min_replicas * job.replica_gpus
    cap = pre.churn_cap_gpus(snap, budget) - pre.churned_gpus(snap, now, budget.churn_window_s) - sum(
        getattr(a, "gpus", 0) for a in d.moves)
    leaf_of = {n: fabric.leaf_of(n) for n in fabric.nodes}
    busy = {leaf_of[n] for r in snap.running.values() for n in r.assignment}
    plans: list[_Plan] = []
    for leaf in fabric.leaves:
        plan = _plan_leaf(d, job, leaf, need, leaf_of, busy, rules, moving, budget, wait)
        if plan is not None and sum(r.gpus for r, _ in plan.moves) <= cap:
            plans.append(plan)
    if not plans:
        return None
    return min(plans, key=lambda p: (p.cost_gpu_s, list(fabric.leaves).index(p.leaf)))


def _plan_leaf(d: Draft, job: Job, leaf: str, need: int, leaf_of: Mapping[str, str], busy: set[str],
               rules: DefragRules, moving: MigrationRules, budget: pre.PreemptionBudget,
               wait: float) -> _Plan | None:
    snap, now, fabric = d.snap, d.now, d.snap.fabric
    members = [n for n in fabric.direct_nodes(leaf) if n in snap.nodes and snap.nodes[n].state.usable]
    if sum(snap.nodes[n].gpus for n in members) < need:
        return None
    free = sum(len(d.free.get(n, ())) for n in members)
    inside: dict[str, RunningJob] = {}
    for r in snap.running.values():
        if any(leaf_of.get(n) == leaf for n in r.assignment):
            inside[r.job_id] = r
    movers: list[RunningJob] = []
    for r in sorted(inside.values(), key=lambda r: (r.gpus * move_cost_s(r, moving, now), r.job_id)):
        if free >= need:
            break
        if (r.priority_class == 0 or r.preempt_deadline is not None or r.job_id in d.touched
                or any(leaf_of.get(n) != leaf for n in r.assignment)
                or pre.recently_preempted(r.job.last_preempted_at, now, budget.job_min_interval_s)):
            continue  # may not move: the leaf's movable jobs must free enough without it
        movers.append(r)
        free += r.gpus
    if free < need or not movers or len(movers) > rules.max_movers:
        return None
    # targets: free GPUs of other, already partly used leaves (never a whole free leaf)
    room: dict[str, frozenset[int]] = {n: g for n, g in d.free.items() if leaf_of.get(n) != leaf
                                       and leaf_of.get(n) in busy}
    moves: list[tuple[RunningJob, Placed]] = []
    for r in movers:
        placed = d.place(gang_for(r.job, r.replicas, frozenset(room)), room)
        if not isinstance(placed, Placed) or len(placed.assignment) > len(r.assignment):
            return None  # no room, or only on more nodes than it runs on now (a worse placement)
        for n, gs in placed.assignment.items():
            room[n] = room[n] - frozenset(gs)
        moves.append((r, placed))
    cost = sum(r.gpus * move_cost_s(r, moving, now) for r in movers)
    gain = need * wait
    if gain < moving.margin * cost:
        return None
    return _Plan(cost, gain, leaf, tuple(moves))
