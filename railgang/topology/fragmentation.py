"""Fragmentation index (R-T9): free GPUs that the waiting gangs cannot use because of topology.

A free GPU is *usable* if it can be part of a placement of at least one waiting gang: it sits in a
node (NVLink domain) with room for a whole TP group of that gang, on an eligible node, and the
eligible capacity adds up to the whole gang. Everything else free is *stranded*. With no waiting
gangs given, the reference gang is a whole-node job, so the index reads "share of free GPUs not in
wholly free nodes".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement.model import eligible_containers, normalise
from railgang.topology.placement.types import GangRequest, Unplaceable

__all__ = ["Fragmentation", "fragmentation_index"]


@dataclass(frozen=True)
class Fragmentation:
    """Free, usable and stranded GPU counts; ``index`` = stranded / free (0 when nothing is free)."""

    free_gpus: int
    usable_gpus: int
    stranded_gpus: int

    @property
    def index(self) -> float:
        return self.stranded_gpus / self.free_gpus if self.free_gpus else 0.0


def fragmentation_index(
    fabric: Fabric,
    free: Mapping[str, frozenset[int]],
    gangs: Sequence[GangRequest] = (),
    *,
    health: LinkHealth | None = None,
) -> Fragmentation:
    """How much of the free capacity the waiting ``gangs`` could actually use."""
    valid = {n: frozenset(i for i in g if 0 <= i < fabric.facts(n).gpus)
             for n, g in free.items() if n in fabric}
    total = sum(len(g) for g in valid.values())
    if not gangs:
        per_node = max((fabric.facts(n).gpus for n in fabric.nodes), default=1)
        gangs = [GangRequest(per_node, tp=per_node)]
    usable: dict[str, int] = {}
    seen: set[tuple[object, ...]] = set()
    for gang in gangs:
        shape = normalise(gang, fabric)
        if isinstance(shape, Unplaceable):
            continue
        # A queue holds many gangs of the same shape; each shape is evaluated once.
        key = (shape, gang.min_gpu_mem_gb, gang.needs_nvlink)
        if key in seen:
            continue
        seen.add(key)
        conts = eligible_containers(fabric, valid, gang, shape, health)
        if isinstance(conts, Unplaceable):
            continue
        if shape.job_class == "single":
            per = {c.name: (c.count // shape.gpus) * shape.gpus for c in conts}
            if not any(per.values()):
                continue
        else:
            if sum(c.units for c in conts) < shape.units:
                continue
            per = {c.name: c.units * shape.tp for c in conts}
        for name, n in per.items():
            usable[name] = max(usable.get(name, 0), n)
    used = sum(usable.values())
    return Fragmentation(total, used, total - used)
