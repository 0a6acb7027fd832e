"""Whole-domain eviction (issue 21 item 3): free one NVLink block or leaf for a multi-node gang.

The node-by-node search of :mod:`~railgang.daemon.core.phases.evict` empties *nodes*; a gang that
must sit inside one NVLink domain (a GB200 NVL72 rack, a topology/block block) or inside one leaf
gains nothing from emptied nodes scattered over several domains, and each of those victims paid a
checkpoint and a requeue for it. Here the unit is the fabric's leaf (a block on topology/block, a
leaf switch on topology/tree), and a victim is always a whole running job. The search is the
victim solver's (``model/victims.py``, ``Need.one_place``); this module states its places and
rules:

1. For each leaf, the GPUs the gang may use there (its eligible nodes), those free now, and the
   running jobs it may evict that hold GPUs there (``cands``, already in the preemption rules'
   order and filtered by class; a job preempted within ``job_min_interval_s`` is left out).
2. A gang that one leaf can hold: per leaf, victims are taken cheapest first (GPU-hours lost per
   GPU they free in that leaf, then the rules' order) until the leaf's free GPUs cover the gang,
   and those no longer needed are dropped again (dearest first). Leaves are tried by GPU-hours
   lost, then victims, then leaf order, at most ``Rules.tries`` placement searches, each restricted to
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

from dataclasses import replace
from typing import Any

from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model import victims
from railgang.daemon.core.model.job import RunningJob
from railgang.daemon.core.phases.draft import Draft

__all__ = ["domain_gang", "domain_rules", "lost_gpu_h"]


def lost_gpu_h(v: RunningJob, now: float) -> float:
    """GPU-hours one eviction of ``v`` costs: work since its checkpoint + save + restore."""
    j = v.job
    return v.gpus * (v.work_since_checkpoint_s(now) + j.checkpoint_cost_s + j.restore_cost_s) / 3600.0


def domain_gang(fabric: Any, need: int) -> bool:
    """Does a gang of ``need`` GPUs span nodes on a fabric with multi-node leaves?"""
    leaves = getattr(fabric, "leaves", ())
    return len(leaves) > 1 and need > getattr(fabric, "max_node_gpus", need)


def leaves(d: Draft, allowed: frozenset[str] | None) -> tuple[victims.Place, ...]:
    """The fabric's leaves, in its order, each with its usable nodes the gang may use."""
    fabric, nodes = d.snap.fabric, d.snap.nodes
    out = []
    for leaf in fabric.leaves:
        members = frozenset(n for n in fabric.direct_nodes(leaf)
                            if n in nodes and nodes[n].state.usable and (allowed is None or n in allowed))
        out.append(victims.Place(leaf, members, sum(nodes[n].gpus for n in members),
                                 sum(len(d.free.get(n, ())) for n in members)))
    return tuple(out)


def domain_rules(d: Draft, allowed: frozenset[str] | None, rules: victims.Rules,
                 budget: pre.PreemptionBudget) -> tuple[tuple[victims.Place, ...], victims.Rules]:
    """The leaves and the rules of a whole-leaf eviction (module docstring): the eviction's own
    rules (who may evict whom, churn room, interval), victims priced by GPU-hours lost per GPU
    they free in the leaf, no shrinks, unneeded victims trimmed, ``domain_patience_s``."""
    now = d.now
    return leaves(d, allowed), replace(
        rules, shrink=victims.never, cost=lambda v: lost_gpu_h(v, now),
        price=lambda v, g, rank: (lost_gpu_h(v, now) / g, rank), trim=True,
        patience_s=budget.domain_patience_s)
