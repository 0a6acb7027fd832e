"""From "k tensor-parallel groups out of each chosen domain" to ranks (R-T5), and the best-fit GPU
window inside one node for small jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from types import MappingProxyType

from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement.cost import score_layout
from railgang.topology.placement.model import Container, Shape
from railgang.topology.placement.types import Placement, RankSlot, ScoreWeights

__all__ = ["best_window", "layout"]

Unit = tuple[tuple[str, int], ...]


def _pick(c: Container, k: int, tp: int, gpus: int, freq: Counter[int]) -> list[Unit]:
    """``k`` TP groups from container ``c``: aligned NVLink blocks on the rails most peers use."""
    if not c.single_node:  # multi-node NVLink domain: keep topology order
        return [c.free[u * tp:(u + 1) * tp] for u in range(k)]
    node = c.first
    idxs = c.indices
    if tp == 1:
        if k == len(idxs):
            return [((node, i),) for i in idxs]
        chosen = sorted(sorted(idxs, key=lambda i: (-freq[i], i))[:k])
        return [((node, i),) for i in chosen]
    if k * tp == gpus:  # the whole node
        return [tuple((node, b + j) for j in range(tp)) for b in range(0, gpus, tp)]
    fs = set(idxs)
    blocks = [b for b in range(0, gpus - tp + 1, tp) if all(b + j in fs for j in range(tp))]
    blocks.sort(key=lambda b: (-freq[b], b))
    picked = sorted(blocks[:k])
    groups = [tuple((node, b + j) for j in range(tp)) for b in picked]
    if len(groups) < k:
        used = {b + j for b in picked for j in range(tp)}
        rest = [i for i in idxs if i not in used]
        for u in range(k - len(groups)):
            groups.append(tuple((node, i) for i in rest[u * tp:(u + 1) * tp]))
    return groups


def layout(
    fabric: Fabric,
    shape: Shape,
    alloc: Sequence[tuple[Container, int]],
    weights: ScoreWeights,
    health: LinkHealth | None = None,
) -> Placement:
    """Turn "k TP groups from each container" into ranks, and score it.

    Unit u (a TP group) is replica ``u // pp``, stage ``u % pp``. Units are ordered leaf by leaf,
    whole replicas of a leaf first, so a replica's stages share a node or a leaf and DP groups
    spread along the tree. TP blocks are chosen on the rails most chosen nodes have free, so DP
    peers share a rail (R-T5).
    """
    alloc = sorted(alloc, key=lambda ck: fabric.index(ck[0].first))
    tp = shape.tp
    freq: Counter[int] = Counter()
    partial = any(k * tp < c.count for c, k in alloc)
    if partial:
        for c, _ in alloc:
            idxs = c.slots[0][1]
            if tp == 1:
                freq.update(idxs)
            else:
                freq.update(b for b in range(0, fabric.facts(c.first).gpus, tp)
                            if all(b + j in idxs for j in range(tp)))
    units: list[Unit] = []
    for c, k in alloc:
        units.extend(_pick(c, k, tp, fabric.facts(c.first).gpus, freq))
    if shape.pp > 1:
        # Whole replicas inside each leaf first; leftover stages of several leaves after them, so
        # a replica crosses a leaf boundary only when no leaf can hold it.
        by_leaf: dict[str, list[Unit]] = {}
        for unit in units:
            by_leaf.setdefault(fabric.leaf_of(unit[0][0]), []).append(unit)
        whole: list[Unit] = []
        rest: list[Unit] = []
        for members in by_leaf.values():
            q = len(members) // shape.pp * shape.pp
            whole.extend(members[:q])
            rest.extend(members[q:])
        units = whole + rest
    ranks: list[RankSlot] = []
    gpus: dict[str, list[int]] = {}
    pp = shape.pp
    for u, group in enumerate(units[: shape.units]):
        d, s = divmod(u, pp)
        for t, (node, i) in enumerate(group):
            ranks.append(RankSlot(node, i, t, s, d))
            gpus.setdefault(node, []).append(i)
    # Global rank order: tp fastest, then stage, then replica (units are replica-major already).
    free_after: dict[str, int] = {}
    for c, _ in alloc:
        for node, idxs in c.slots:
            free_after[node] = free_after.get(node, 0) + len(idxs)
    for node, used in gpus.items():
        free_after[node] -= len(used)
    cost, breakdown = score_layout(fabric, ranks, tp, shape.pp, shape.dp, weights, free_after, health)
    return Placement(
        gpus=MappingProxyType({n: tuple(sorted(v)) for n, v in gpus.items()}),
        ranks=tuple(ranks),
        cost=cost,
        breakdown=MappingProxyType(breakdown),
        job_class=shape.job_class,
    )


def best_window(free_idx: Sequence[int], need: int, gpus: int) -> list[int]:
    """Best-fit GPUs inside one node: an aligned power-of-two window whose buddy is busiest."""
    fs = set(free_idx)
    if need & (need - 1) == 0 and need <= gpus:
        best: tuple[int, int] | None = None
        for start in range(0, gpus - need + 1, need):
            if all(start + j in fs for j in range(need)):
                parent = start - start % (2 * need)
                buddy_free = sum(1 for j in range(parent, min(parent + 2 * need, gpus)) if j in fs)
                key = (buddy_free, start)
                if best is None or key < best:
                    best = key
        if best is not None:
            return list(range(best[1], best[1] + need))
    return sorted(free_idx)[:need]
