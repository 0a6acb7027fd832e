"""Hot spares (issue 20; docs/failures.md "Hot spares"): idle nodes kept in the leaves where a
large gang runs, so that when one of its nodes dies the gang restarts at once, in its leaf,
instead of waiting for other work to end or spreading across leaves.

Which nodes are spares, per cycle (pure, from the snapshot): in each leaf where a running job of
at least ``min_gang_gpus`` holds GPUs, up to ``per_leaf`` of the leaf's other usable nodes:
first those already lent out (every job on them is lendable, below), then wholly idle ones, by
name. Who may use them:

- a job a node failure requeued (``JobState.after_fault``) of at least ``min_gang_gpus``: the
  restart they are kept for;
- lendable work: class 3 (preemptible) whose time limit, or known remaining work, ends within
  ``lend_max_s``. It is evicted like any class-3 job when the restart needs the node.

Everything else is placed as if the spares were not there. ``per_leaf = 0`` (the default) turns
the rule off: no spare, nothing changes, and every pinned schedule stays as it is.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from railgang.daemon.core.model.job import Job, PriorityClass
from railgang.daemon.core.model.snapshot import Snapshot

__all__ = ["SpareRules", "lendable", "may_use_spares", "spare_nodes"]


@dataclass(frozen=True, slots=True)
class SpareRules:
    per_leaf: int = 0  # idle nodes kept in each leaf where a large gang runs; 0 = off
    min_gang_gpus: int = 64  # gangs of at least this many GPUs get spares in their leaves
    lend_max_s: float = 3600.0  # spares are lent to class-3 work that ends within this long

    def __post_init__(self) -> None:
        if self.per_leaf < 0 or self.min_gang_gpus < 1:
            raise ValueError(f"spares: per_leaf {self.per_leaf} >= 0 and min_gang_gpus "
                             f"{self.min_gang_gpus} >= 1 expected")
        if not math.isfinite(self.lend_max_s) or self.lend_max_s < 0:
            raise ValueError(f"spares: lend_max_s {self.lend_max_s!r}: a finite number >= 0")

    @property
    def on(self) -> bool:
        return self.per_leaf > 0


def lendable(job: Job, rules: SpareRules) -> bool:
    """Short preemptible work: class 3, ending within ``lend_max_s`` by its time limit or its
    known remaining work (a job that says neither is not lent a spare)."""
    if job.priority_class != PriorityClass.BATCH:
        return False
    known = [t for t in (job.request.time_limit_s, job.state.work_remaining_s) if t is not None]
    return bool(known) and min(known) <= rules.lend_max_s


def may_use_spares(job: Job, rules: SpareRules) -> bool:
    return (job.state.after_fault and job.gpus >= rules.min_gang_gpus) or lendable(job, rules)


def spare_nodes(snapshot: Snapshot, rules: SpareRules) -> frozenset[str]:
    """This cycle's spare nodes (see the module docstring); empty when the rule is off."""
    fabric = snapshot.fabric
    if not rules.on or fabric is None:
        return frozenset()
    big: dict[str, set[str]] = defaultdict(set)  # leaf -> nodes the large gangs hold there
    lent_only: dict[str, bool] = {}  # node -> every job on it is lendable
    for run in snapshot.running.values():
        if run.gpus >= rules.min_gang_gpus:
            for node in run.assignment:
                big[fabric.leaf_of(node)].add(node)
            continue
        ok = lendable(run.job, rules)
        for node in run.assignment:
            lent_only[node] = lent_only.get(node, True) and ok
    spares: list[str] = []
    for leaf, held in sorted(big.items()):
        spares += _leaf_spares(snapshot, fabric.direct_nodes(leaf), held, lent_only,
                               rules.per_leaf)
    return frozenset(spares)


def _leaf_spares(snapshot: Snapshot, nodes: tuple[str, ...], held: set[str],
                 lent_only: Mapping[str, bool], n: int) -> list[str]:
    lent, idle = [], []
    for name in sorted(nodes):
        node = snapshot.nodes.get(name)
        if name in held or node is None or not node.state.usable:
            continue
        if lent_only.get(name):
            lent.append(name)
        elif name not in lent_only and len(snapshot.free.get(name, ())) == node.gpus:
            idle.append(name)
    return (lent + idle)[:n]
