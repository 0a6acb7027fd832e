"""Seeded synthetic cluster states: which GPUs are free when a fraction of the fleet is busy.

Independent per-GPU coin flips would leave almost no whole node free (0.5^8), which is not what a
busy cluster looks like: real occupancy comes in jobs. So nodes are drawn as wholly busy, wholly
free, or shared by small aligned jobs (1, 2 or 4 GPUs), in proportions that hit the requested busy
fraction on average.
"""

from __future__ import annotations

import random

from railgang.topology.fabric import Fabric

__all__ = ["FreeMap", "all_free", "random_occupancy"]

FreeMap = dict[str, frozenset[int]]

# Share of nodes that are shared by small jobs, at most; the rest is split busy/free.
_SHARED = 0.4


def all_free(fabric: Fabric) -> FreeMap:
    """Every GPU of every node free."""
    return {n: frozenset(range(fabric.facts(n).gpus)) for n in fabric.nodes}


def _shared_node(gpus: int, rng: random.Random) -> frozenset[int]:
    """Free GPUs of a node exactly half-filled with aligned 1/2/4-GPU jobs."""
    busy: set[int] = set()
    target = gpus // 2
    while len(busy) < target:
        size = rng.choice([s for s in (1, 2, 4) if s <= target - len(busy)])
        start = rng.randrange(0, gpus - size + 1, size)
        block = set(range(start, start + size))
        if not block & busy:
            busy |= block
    return frozenset(set(range(gpus)) - busy)


def random_occupancy(fabric: Fabric, fraction: float, seed: int = 0) -> FreeMap:
    """Free GPUs when about ``fraction`` of the GPUs are busy (nodes with no free GPU are omitted)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"occupancy must be within [0, 1], got {fraction}")
    rng = random.Random(seed)
    shared = min(_SHARED, 2 * min(fraction, 1 - fraction))
    busy = fraction - shared / 2
    out: FreeMap = {}
    for node in fabric.nodes:
        gpus = fabric.facts(node).gpus
        r = rng.random()
        if r < busy:
            continue
        free = _shared_node(gpus, rng) if r < busy + shared else frozenset(range(gpus))
        if free:
            out[node] = free
    return out
