"""Whole-domain eviction (issue 21 item 3): free one NVLink block or leaf for a multi-node gang.

The node-by-node search of :mod:`~railgang.daemon.core.phases.evict` empties *nodes*; a gang that
must sit inside one NVLink domain (a GB200 NVL72 rack, a topology/block block) or inside one leaf
gains nothing from emptied nodes scattered over several domains, and each of those victims paid a
checkpoint and a requeue for it. Here the unit is the fabric's leaf (a block on topology/block, a
leaf switch on topology/tree), and a victim is always a whole running job:

1. For each leaf, the GPUs the gang may use there (its eligible nodes), those free now, and the
   running jobs it may evict that hold GPUs there (``cands``, already in the preemption rules'
   order and filtered by class; a job preempted within ``job_min_interval_s`` is left out).
2. A gang that one leaf can hold: per leaf, victims are taken cheapest first (GPU-hours lost per
   GPU they free in that leaf, then the rules' order) until the leaf's free GPUs cover the gang,
   and those no longer needed are dropped again (dearest first). Leaves are tried by GPU-hours
   lost, then victims, then leaf order, at most ``_TRIES`` placement searches, each restricted to
   the leaf's nodes; a placement that fails there (GPUs free but not in whole TP groups) takes
   that leaf's next victims before the next leaf is tried.
3. A gang larger than a leaf: whole leaves, emptied of every victim, cheapest per GPU first,
   until their GPUs cover it; one placement search restricted to them.
4. Victims the placement found does not use are not evicted (their GPUs would free nothing the
   gang takes). The churn room caps the victims' GPUs (classes above serving).

The result is a victim set whose freed GPUs the gang's placement uses, inside one leaf whenever a
leaf can hold the gang, or nothing: never a scatter of partial evictions that frees nothing
usable. GPU-hours lost per victim = GPUs × (work since its last checkpoint + checkpoint save +
restore), the preemption tax of ``model/economics.py`` in GPU-hours. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.phases.draft import Draft

__all__ = ["DomainEviction", "domain_gang", "evict_domains", "lost_gpu_h"]

_TRIES = 4  # placement searches per waiting gang (each is a full topology search)


@dataclass(frozen=True, slots=True)
class DomainEviction:
    """What the search found: where the gang goes and whom that costs, or nothing."""

    placed: Placed | None = None
    kills: tuple[RunningJob, ...] = ()
    leaves: tuple[str, ...] = ()  # the leaves the gang's placement uses
    lost_gpu_h: float = 0.0
    budget_hit: bool = False  # a budget ruled out a victim or a leaf that might have helped


def lost_gpu_h(v: RunningJob, now: float) -> float:
    """GPU-hours one eviction of ``v`` costs: work since its checkpoint + save + restore."""
    j = v.job
    return v.gpus * (v.work_since_checkpoint_s(now) + j.checkpoint_cost_s + j.restore_cost_s) / 3600.0


def domain_gang(fabric: Any, need: int) -> bool:
    """Does a gang of ``need`` GPUs span nodes on a fabric with multi-node leaves?"""
    leaves = getattr(fabric, "leaves", ())
    return len(leaves) > 1 and need > getattr(fabric, "max_node_gpus", need)


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
