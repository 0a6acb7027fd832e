"""The placement engine (R-T4, R-T7): a single-node fast path, and for gangs a greedy bottom-up fill
with a pruned tree search at every level, over a few best-fit and sampled scopes whose complete
layouts are scored; the cheapest wins.

Search, per candidate scope (a leaf, a spine, …): at each level choose the fewest children that
cover the need with the least waste (greedy best fit, then a depth-first search pruned by the
largest sums still reachable), down to nodes. Scopes: the best-fitting ones at the lowest level
that can hold the gang, a seeded sample of the others there, the best fit one and two levels up,
and a flat "fewest nodes anywhere" candidate. Pipeline replicas are first kept whole inside leaves
(granularity ``pp``), then not. Deterministic for a given ``seed``; ties go to topology order.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from itertools import pairwise
from types import MappingProxyType

from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement.layout import best_window, layout
from railgang.topology.placement.model import (
    Container,
    Shape,
    eligible_containers,
    normalise,
    usable_indices,
)
from railgang.topology.placement.types import (
    CLASS_WEIGHTS,
    GangRequest,
    Placement,
    PlacementFailure,
    ScoreWeights,
    Unplaceable,
)

__all__ = ["choose", "place"]

# Tree-search budget per level: enough to find exact best fits among a few dozen leaves/nodes,
# small enough that a 256-GPU gang on 1,250 nodes stays within a few milliseconds per candidate.
_SEARCH_BUDGET = 400
_BEST_FIT_SCOPES = 3
_SAMPLED_SCOPES = 2
_EXTRA_LEVELS = 2  # also score the best-fit scope one and two levels above the lowest that fits

Alloc = list[tuple[Container, int]]


def choose(caps: Sequence[int], need: int, budget: int = _SEARCH_BUDGET) -> list[int] | None:
    """Indices of the fewest items covering ``need``, then the least waste (best fit), sorted.

    Greedy first (largest items, then the smallest item that covers the rest: Slurm's best fit),
    then a depth-first search over same-size subsets, pruned by the largest sums still reachable.
    """
    # largest first, ties in index order (a stable sort keeps it under reverse)
    order = sorted([i for i in range(len(caps)) if caps[i] > 0], key=caps.__getitem__, reverse=True)
    acc, k = 0, 0
    for i in order:
        acc += caps[i]
        k += 1
        if acc >= need:
            break
    else:
        return None
    head = order[: k - 1]
    rem = need - sum(caps[i] for i in head)
    last = min((i for i in order[k - 1:] if caps[i] >= rem), key=lambda i: (caps[i], i))
    best = [*head, last]
    best_waste = sum(caps[i] for i in best) - need
    if best_waste == 0 or k == 1:
        return sorted(best)
    sorted_caps = [caps[i] for i in order]
    steps = 0

    def dfs(start: int, chosen: list[int], total: int) -> bool:
        nonlocal best, best_waste, steps
        steps += 1
        left = k - len(chosen)
        if left == 0:
            if 0 <= total - need < best_waste:
                best, best_waste = [order[j] for j in chosen], total - need
            return best_waste == 0
        for j in range(start, len(order) - left + 1):
            if steps > budget:
                return True
            if total + sum(sorted_caps[j:j + left]) < need:
                return False  # sorted descending: later j reach even less
            if dfs(j + 1, [*chosen, j], total + sorted_caps[j]):
                return True
        return False

    dfs(0, [], 0)
    return sorted(best)


def _splits_rails(chosen: Sequence[Container]) -> bool:
    """True if two neighbouring containers share no free GPU index."""
    sets = [c.slots[0][1] for c in chosen]
    return any(not a & b for a, b in pairwise(sets))


def _rail_aligned(conts: Sequence[Container], need: int, k: int) -> list[Container] | None:
    """As many containers, all with identical free GPU indices, if that covers the need: then
    every DP ring stays on its rail (R-T5). Only single-node containers qualify."""
    by_sig: dict[tuple[int, ...], list[Container]] = {}
    for c in conts:
        if c.units and c.single_node:
            by_sig.setdefault(c.indices, []).append(c)
    if len(by_sig) < 2:
        return None
    for sig in sorted(by_sig, key=lambda s: (-len(s) * len(by_sig[s]), s)):
        group = by_sig[sig]
        if sum(c.units for c in group) < need:
            continue
        idx = choose([c.units for c in group], need)
        if idx is not None and len(idx) <= k:
            return [group[i] for i in idx]
    return None


def _fill_leaf(conts: Sequence[Container], need: int, tie_last: bool) -> Alloc | None:
    """Choose nodes (containers) inside one leaf; the waste stays in the smallest one."""
    idx = choose([c.units for c in conts], need)
    if idx is None:
        return None
    chosen = [conts[i] for i in idx]
    waste = sum(c.units for c in chosen) - need
    if waste or _splits_rails(chosen):
        aligned = _rail_aligned(conts, need, len(idx))
        if aligned is not None and (sum(c.units for c in aligned) - need <= waste or _splits_rails(chosen)):
            chosen, waste = aligned, sum(c.units for c in aligned) - need
    small = min(range(len(chosen)), key=lambda j: (chosen[j].units, -j if tie_last else j))
    return [(c, c.units - (waste if j == small else 0)) for j, c in enumerate(chosen)]


class _Tree:
    """Leaf-level aggregates of one request, so every scope's capacity is a sum over its leaves."""

    def __init__(self, fabric: Fabric, conts: Sequence[Container]) -> None:
        self.fabric = fabric
        self.leaf_conts: dict[str, list[Container]] = {}
        for c in conts:
            self.leaf_conts.setdefault(c.leaf, []).append(c)
        self.leaf_units = {leaf: sum(c.units for c in cs) for leaf, cs in self.leaf_conts.items()}
        self.depth = fabric.depth
        self._anc: dict[tuple[str, int], str] = {}

    def anc(self, leaf: str, h: int) -> str:
        """The scope ``h`` levels above ``leaf`` (0 = the leaf itself; past the roots: ``*``)."""
        key = (leaf, h)
        found = self._anc.get(key)
        if found is None:
            first = self.leaf_conts[leaf][0].first
            found = self.fabric.ancestor(first, h) if h < self.depth else "*"
            self._anc[key] = found
        return found

    def cap(self, leaves: Sequence[str], gran: int) -> int:
        """Units below these leaves, counting whole replicas (``gran`` units) per leaf."""
        return sum(self.leaf_units[lf] // gran * gran for lf in leaves)

    def scopes(self, h: int) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for leaf in self.leaf_conts:
            out.setdefault(self.anc(leaf, h), []).append(leaf)
        return out

    def fill(self, leaves: Sequence[str], h: int, need: int, gran: int, tie_last: bool) -> Alloc | None:
        """Allocate ``need`` units below the scope made of ``leaves`` at height ``h``."""
        if h == 0:
            return _fill_leaf(self.leaf_conts[leaves[0]], need, tie_last)
        groups: dict[str, list[str]] = {}
        for leaf in leaves:
            groups.setdefault(self.anc(leaf, h - 1), []).append(leaf)
        names = list(groups)
        caps = [self.cap(groups[n], gran) for n in names]
        idx = choose(caps, need)
        if idx is None:
            return None
        waste = sum(caps[i] for i in idx) - need
        small = min(idx, key=lambda i: (caps[i], -i if tie_last else i))
        out: Alloc = []
        for i in idx:
            part = self.fill(groups[names[i]], h - 1, caps[i] - (waste if i == small else 0), gran, tie_last)
            if part is None:
                return None
            out.extend((c, k) for c, k in part if k > 0)
        return out


def _single(fabric: Fabric, free: Mapping[str, frozenset[int]], request: GangRequest, shape: Shape,
            weights: ScoreWeights, health: LinkHealth | None) -> Placement | None:
    """Fast path for gangs that fit one node: the best-fit node (fewest GPUs left over), on the
    leaf with the least free capacity, keeping emptier nodes and leaves whole for gangs."""
    need = shape.gpus
    need_nvlink = request.needs_nvlink or shape.tp > 1
    lame = health.quarantined if (health is not None and shape.job_class != "single") else {}
    min_mem = request.min_gpu_mem_gb
    leaf_free: dict[str, int] = {}
    fits: list[tuple[int, int, str, str, frozenset[int], int]] = []
    for node, idxs in free.items():
        hot = fabric.hot(node) if idxs else None
        if hot is None:
            continue
        gpus, mem, nvlink, index, leaf = hot
        idxs = usable_indices(idxs, gpus)
        n = len(idxs)
        leaf_free[leaf] = leaf_free.get(leaf, 0) + n
        if n >= need and mem >= min_mem and (nvlink or not need_nvlink) and node not in lame:
            fits.append((n - need, index, node, leaf, idxs, gpus))
    if not fits:
        return None
    slack, _, node, leaf, idxs, gpus = min(fits, key=lambda f: (f[0], leaf_free[f[3]], f[1]))
    window = best_window(sorted(idxs), need, gpus)
    narrowed = Container(node, ((node, frozenset(window)),), need, need // shape.tp, node, leaf)
    p = layout(fabric, shape, [(narrowed, narrowed.units)], weights, health)
    breakdown = {**p.breakdown, "pack": weights.pack * (1.0 if slack else 0.0)}
    return Placement(p.gpus, p.ranks, sum(breakdown.values()), MappingProxyType(breakdown),
                     shape.job_class, leaf)


def _allowed(free: Mapping[str, frozenset[int]], nodes: frozenset[str],
             gpus: int) -> Mapping[str, frozenset[int]] | Unplaceable:
    """``free`` on ``nodes`` only; INELIGIBLE_NODES when that alone leaves too few GPUs."""
    kept = {n: g for n, g in free.items() if n in nodes}
    have = sum(len(g) for g in kept.values())
    total = sum(len(g) for g in free.values())
    if have < gpus <= total:
        return Unplaceable(PlacementFailure.INELIGIBLE_NODES,
                           f"{total} GPUs free, {have} of them on the {len(nodes)} nodes the gang "
                           f"may use, {gpus} needed")
    return kept


def place(
    fabric: Fabric,
    free: Mapping[str, frozenset[int]],
    request: GangRequest,
    *,
    health: LinkHealth | None = None,
    seed: int = 0,
) -> Placement | Unplaceable:
    """Place ``request`` on the free GPUs, all or nothing, or say why it cannot be placed now.

    ``free`` maps node -> free GPU indices (absent nodes have none; unknown nodes and indices
    beyond a node's GPU count are ignored). Deterministic for a given ``seed``.
    """
    shape = normalise(request, fabric)
    if isinstance(shape, Unplaceable):
        return shape
    if request.nodes is not None:
        allowed = _allowed(free, request.nodes, shape.gpus)
        if isinstance(allowed, Unplaceable):
            return allowed
        free = allowed
    weights = CLASS_WEIGHTS[shape.job_class]
    if shape.gpus <= fabric.max_node_gpus and not fabric.multi_node_domains:
        single = _single(fabric, free, request, shape, weights, health)
        if single is not None:
            return single
    conts = eligible_containers(fabric, free, request, shape, health, min_units=1)
    if isinstance(conts, Unplaceable):
        return conts
    if shape.job_class == "single" or shape.units == 1:
        one = [c for c in conts if c.units >= shape.units]
        if not one:
            return Unplaceable(PlacementFailure.TOPOLOGY_FRAGMENTED,
                               f"no single NVLink domain has {shape.gpus} free GPUs")
        best = min(one, key=lambda c: (c.count - shape.gpus, fabric.index(c.first)))
        p = layout(fabric, shape, [(best, shape.units)], weights, health)
        return Placement(p.gpus, p.ranks, p.cost, p.breakdown, p.job_class, best.leaf)
    total = sum(c.units for c in conts)
    if total < shape.units:
        return Unplaceable(PlacementFailure.TOPOLOGY_FRAGMENTED,
                           f"{shape.units} groups of {shape.tp} NVLink-connected GPUs needed, {total} available")
    tree = _Tree(fabric, conts)
    rng = random.Random(seed)
    candidates: list[tuple[Alloc, str]] = []
    grans = [shape.pp, 1] if shape.pp > 1 else [1]
    for g, gran in enumerate(grans):
        found = 0
        for h in range(tree.depth + 1):
            scopes = tree.scopes(h)
            fitting = sorted((cap - shape.units, i, name) for i, (name, leaves) in enumerate(scopes.items())
                             if (cap := tree.cap(leaves, gran)) >= shape.units)
            if not fitting:
                continue
            picks = fitting[:1]
            if found == 0 and g == 0:
                rest = fitting[_BEST_FIT_SCOPES:]
                picks = fitting[:_BEST_FIT_SCOPES] + rng.sample(rest, min(_SAMPLED_SCOPES, len(rest)))
            for p_i, (_slack, _i, scope) in enumerate(picks):
                for tie_last in ((True, False) if p_i == 0 else (True,)):
                    alloc = tree.fill(scopes[scope], h, shape.units, gran, tie_last)
                    if alloc is not None:
                        candidates.append((alloc, scope))
            found += 1
            if found > (_EXTRA_LEVELS if g == 0 else 0):
                break
    # A flat candidate: the fewest, fullest containers anywhere. It wins when packing pipeline
    # stages onto fewer nodes beats staying under one leaf (pp-heavy gangs on fragmented leaves).
    flat = _fill_leaf(conts, shape.units, True)
    if flat is not None:
        candidates.append((flat, "*"))
    best_p: Placement | None = None
    seen: set[tuple[tuple[str, int], ...]] = set()
    for alloc, scope in candidates:
        key = tuple(sorted((c.name, k) for c, k in alloc))
        if key in seen:
            continue
        seen.add(key)
        p = layout(fabric, shape, alloc, weights, health)
        if best_p is None or p.cost < best_p.cost:
            best_p = Placement(p.gpus, p.ranks, p.cost, p.breakdown, p.job_class, scope, len(seen))
    if best_p is None:
        return Unplaceable(PlacementFailure.TOPOLOGY_FRAGMENTED,
                           f"{total} groups of {shape.tp} free, but none combine into {shape.units}")
    return Placement(best_p.gpus, best_p.ranks, best_p.cost, best_p.breakdown, best_p.job_class,
                     best_p.scope, len(seen))
