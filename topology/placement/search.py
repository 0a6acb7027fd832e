"""The placement engine (R-T4, R-T5, R-T7): eligibility, a single-node fast path, and for gangs a
greedy bottom-up fill with a pruned tree search at every level, over a few sampled scopes whose
complete layouts are scored; the cheapest wins.

Everything is deterministic for a given ``seed``: sampling uses ``random.Random(seed)`` and every
tie is broken by topology order.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from topology.fabric import Fabric
from topology.health import LinkHealth
from topology.placement.cost import score_layout
from topology.placement.types import (
    CLASS_WEIGHTS,
    GangRequest,
    JobClass,
    Placement,
    RankSlot,
    ScoreWeights,
    Unplaceable,
)

__all__ = ["Container", "Shape", "eligible_containers", "layout", "normalise", "place"]

# Tree-search budget per level: enough to find exact best fits among a few dozen leaves/nodes,
# small enough that a 256-GPU gang on 1,250 nodes stays within a few milliseconds per candidate.
_SEARCH_BUDGET = 400
_BEST_FIT_SCOPES = 3
_SAMPLED_SCOPES = 3


@dataclass(frozen=True)
class Shape:
    """A validated request: ``units`` TP groups of ``tp`` GPUs, ``pp`` stages x ``dp`` replicas."""

    gpus: int
    tp: int
    pp: int
    dp: int
    job_class: JobClass

    @property
    def units(self) -> int:
        return self.pp * self.dp


@dataclass(frozen=True)
class Container:
    """An NVLink domain (usually one node) with its usable free GPUs, in topology order."""

    name: str
    free: tuple[tuple[str, int], ...]
    units: int
    first: str


def normalise(request: GangRequest, fabric: Fabric) -> Shape | Unplaceable:
    """Check sizes and infer dp and the job class."""
    tp, pp, gpus = request.tp, request.pp, request.gpus
    if gpus < 1 or tp < 1 or pp < 1 or (request.dp is not None and request.dp < 1):
        return Unplaceable("invalid_request", "gpus, tp, pp and dp must be positive")
    dp = request.dp if request.dp is not None else gpus // (tp * pp)
    if tp * pp * dp != gpus:
        return Unplaceable("invalid_request", f"tp*pp*dp = {tp}*{pp}*{dp} = {tp * pp * dp} != gpus = {gpus}")
    biggest = max((sum(fabric.facts(n).gpus for n in m) for m in fabric.domains.values()), default=0)
    if tp > biggest:
        return Unplaceable("invalid_request", f"tp={tp} is wider than the largest NVLink domain ({biggest} GPUs)")
    job_class = request.job_class
    if job_class is None:
        per_node = max((fabric.facts(n).gpus for n in fabric.nodes), default=0)
        if pp == 1 and gpus <= per_node and (tp == 1 or tp == gpus):
            job_class = "single"
        elif tp > 1 or pp > 1:
            job_class = "3d"
        else:
            job_class = "dp"
    return Shape(gpus, tp, pp, dp, job_class)


def eligible_containers(
    fabric: Fabric,
    free: Mapping[str, frozenset[int]],
    request: GangRequest,
    shape: Shape,
    health: LinkHealth | None,
) -> list[Container] | Unplaceable:
    """Containers (NVLink domains) whose free GPUs meet every resource dimension, or why none do."""
    need_nvlink = request.needs_nvlink or shape.tp > 1
    avoid_lame = shape.job_class != "single" and health is not None and bool(health.quarantined)
    total = mem_ok = link_ok = 0
    per_domain: dict[str, list[tuple[str, int]]] = {}
    for node, idxs in free.items():
        if not idxs or node not in fabric:
            continue
        facts = fabric.facts(node)
        usable = sorted(i for i in idxs if 0 <= i < facts.gpus)
        total += len(usable)
        if facts.gpu_mem_gb < request.min_gpu_mem_gb:
            continue
        mem_ok += len(usable)
        if need_nvlink and not facts.nvlink:
            continue
        link_ok += len(usable)
        if avoid_lame and health is not None and health.is_quarantined(node):
            continue
        per_domain.setdefault(fabric.domain_of(node), []).extend((node, i) for i in usable)
    g = shape.gpus
    if total < g:
        return Unplaceable("insufficient_gpus", f"{g} GPUs requested, {total} free")
    if mem_ok < g:
        return Unplaceable("gpu_memory", f"{mem_ok} free GPUs have >= {request.min_gpu_mem_gb:g} GB, {g} needed")
    if link_ok < g:
        return Unplaceable("no_nvlink_domain", f"{link_ok} free GPUs are on NVLink nodes, {g} needed")
    usable_total = sum(len(v) for v in per_domain.values())
    if usable_total < g:
        return Unplaceable("quarantined", f"only {usable_total} free GPUs avoid quarantined nodes, {g} needed")
    out = []
    for name, gpus in per_domain.items():
        gpus.sort(key=lambda ng: (fabric.index(ng[0]), ng[1]))
        out.append(Container(name, tuple(gpus), len(gpus) // shape.tp, gpus[0][0]))
    out.sort(key=lambda c: fabric.index(c.first))
    return out


def _choose(caps: Sequence[int], need: int, budget: int = _SEARCH_BUDGET) -> list[int] | None:
    """Indices of the fewest items covering ``need``, then the least waste (best fit).

    Greedy first (largest items, then the smallest item that covers the rest: Slurm's best fit),
    then a depth-first search over same-size subsets, pruned by the largest sums still reachable.
    """
    order = sorted((i for i in range(len(caps)) if caps[i] > 0), key=lambda i: (-caps[i], i))
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
    fits = [i for i in order[k - 1:] if caps[i] >= rem]
    last = min(fits, key=lambda i: (caps[i], i))
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
            waste = total - need
            if 0 <= waste < best_waste:
                best, best_waste = [order[j] for j in chosen], waste
            return best_waste == 0
        for j in range(start, len(order) - left + 1):
            if steps > budget:
                return True
            if total + sum(sorted_caps[j:j + left]) < need:
                return False  # sorted descending: later j reach even less
            if total + sorted_caps[j] - need >= best_waste and left == 1:
                continue
            if dfs(j + 1, [*chosen, j], total + sorted_caps[j]):
                return True
        return False

    dfs(0, [], 0)
    return sorted(best)


def _pick(c: Container, k: int, tp: int, fabric: Fabric, freq: Counter[int]) -> list[tuple[tuple[str, int], ...]]:
    """``k`` TP groups from container ``c``: aligned NVLink blocks on the rails most peers use."""
    if len({n for n, _ in c.free}) > 1:  # multi-node NVLink domain: keep topology order
        return [c.free[u * tp:(u + 1) * tp] for u in range(k)]
    node = c.first
    idxs = [i for _, i in c.free]
    if tp == 1:
        chosen = sorted(sorted(idxs, key=lambda i: (-freq[i], i))[:k])
        return [((node, i),) for i in chosen]
    fs = set(idxs)
    blocks = [b for b in range(0, fabric.facts(node).gpus - tp + 1, tp) if all(b + j in fs for j in range(tp))]
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

    Unit u (a TP group, in topology order) is replica ``u // pp``, stage ``u % pp``: a replica's
    stages are consecutive, hence on one node or one leaf; replicas, and so each DP group, spread
    along the tree. Unit blocks are chosen on the rails that most containers have free, so DP peers
    sit on the same rail (R-T5).
    """
    alloc = sorted(alloc, key=lambda ck: fabric.index(ck[0].first))
    freq: Counter[int] = Counter()
    for c, _ in alloc:
        idxs = {i for _, i in c.free}
        if shape.tp == 1:
            freq.update(idxs)
        else:
            freq.update(b for b in range(0, fabric.facts(c.first).gpus, shape.tp)
                        if all(b + j in idxs for j in range(shape.tp)))
    units: list[tuple[tuple[str, int], ...]] = []
    for c, k in alloc:
        units.extend(_pick(c, k, shape.tp, fabric, freq))
    ranks: list[RankSlot] = []
    gpus: dict[str, list[int]] = {}
    for u, group in enumerate(units[: shape.units]):
        d, s = divmod(u, shape.pp)
        for t, (node, i) in enumerate(group):
            ranks.append(RankSlot(node, i, t, s, d))
            gpus.setdefault(node, []).append(i)
    # Global rank order: tp fastest, then stage, then replica.
    ranks.sort(key=lambda r: (r.dp_rank, r.pp_stage, r.tp_rank))
    free_after: dict[str, int] = {}
    for c, _ in alloc:
        for node, _i in c.free:
            free_after[node] = free_after.get(node, 0) + 1
    for node, used in gpus.items():
        free_after[node] -= len(used)
    cost, breakdown = score_layout(fabric, ranks, shape.tp, shape.pp, shape.dp, weights, free_after, health)
    return Placement(
        gpus=MappingProxyType({n: tuple(sorted(v)) for n, v in gpus.items()}),
        ranks=tuple(ranks),
        cost=cost,
        breakdown=MappingProxyType(breakdown),
        job_class=shape.job_class,
    )


def _window(free_idx: Sequence[int], need: int, gpus: int) -> list[int]:
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


def _single(fabric: Fabric, conts: Sequence[Container], shape: Shape, weights: ScoreWeights,
            health: LinkHealth | None) -> Placement | None:
    """Fast path for gangs that fit one NVLink domain: best-fit container, tightest leaf first."""
    leaf_free: Counter[str] = Counter()
    for c in conts:
        leaf_free[fabric.leaf_of(c.first)] += len(c.free)
    best: tuple[int, int, int] | None = None
    pick: Container | None = None
    for c in conts:
        if c.units * shape.tp < shape.gpus:
            continue
        key = (len(c.free) - shape.gpus, leaf_free[fabric.leaf_of(c.first)], fabric.index(c.first))
        if best is None or key < best:
            best, pick = key, c
    if pick is None:
        return None
    if len({n for n, _ in pick.free}) == 1 and (shape.tp == 1 or shape.tp == shape.gpus):
        chosen = _window([i for _, i in pick.free], shape.gpus, fabric.facts(pick.first).gpus)
        narrowed = Container(pick.name, tuple((pick.first, i) for i in chosen), shape.units, pick.first)
        placement = layout(fabric, shape, [(narrowed, shape.units)], weights, health)
        left = len(pick.free) - shape.gpus
        pack = weights.pack * (1.0 if left > 0 else 0.0)
        breakdown = {**placement.breakdown, "pack": pack}
        return Placement(placement.gpus, placement.ranks, sum(breakdown.values()),
                         MappingProxyType(breakdown), shape.job_class, fabric.leaf_of(pick.first))
    return layout(fabric, shape, [(pick, shape.units)], weights, health)


def _fill(fabric: Fabric, conts: Sequence[Container], h: int, need: int, gran: int,
          anc: Mapping[tuple[str, int], str]) -> list[tuple[Container, int]] | None:
    """Allocate ``need`` units below one scope at height ``h`` (-1: choose containers)."""
    if h < 0:
        idx = _choose([c.units for c in conts], need)
        if idx is None:
            return None
        chosen = _rail_aligned(conts, need, len(idx)) or [conts[i] for i in idx]
        waste = sum(c.units for c in chosen) - need
        # The remainder comes out of the smallest chosen container: the rest are taken whole.
        small = min(range(len(chosen)), key=lambda j: (chosen[j].units, -j))
        return [(c, c.units - (waste if j == small else 0)) for j, c in enumerate(chosen)]
    groups: dict[str, list[Container]] = {}
    for c in conts:
        groups.setdefault(anc[(c.first, h)], []).append(c)
    names = list(groups)
    caps = [_cap(groups[n], gran, h, anc) for n in names]
    idx = _choose(caps, need)
    if idx is None:
        return None
    waste = sum(caps[i] for i in idx) - need
    small = min(idx, key=lambda i: (caps[i], -i))
    out: list[tuple[Container, int]] = []
    for i in idx:
        part = _fill(fabric, groups[names[i]], h - 1, caps[i] - (waste if i == small else 0), gran, anc)
        if part is None:
            return None
        out.extend((c, k) for c, k in part if k > 0)
    return out


def _rail_aligned(conts: Sequence[Container], need: int, k: int) -> list[Container] | None:
    """The same number of containers, all with identical free GPU indices, if that is possible:
    then every DP ring stays on its rail (R-T5). Only single-node containers qualify."""
    by_sig: dict[tuple[int, ...], list[Container]] = {}
    for c in conts:
        if c.units and all(n == c.first for n, _ in c.free):
            by_sig.setdefault(tuple(i for _, i in c.free), []).append(c)
    if len(by_sig) < 2:
        return None
    for sig in sorted(by_sig, key=lambda s: (-len(s) * len(by_sig[s]), s)):
        group = by_sig[sig]
        if sum(c.units for c in group) < need:
            continue
        idx = _choose([c.units for c in group], need)
        if idx is not None and len(idx) <= k:
            return [group[i] for i in idx]
    return None


def _cap(conts: Sequence[Container], gran: int, h: int, anc: Mapping[tuple[str, int], str]) -> int:
    """Units below a scope, counting only whole replicas (``gran`` units) per leaf."""
    if h == 0:
        return sum(c.units for c in conts) // gran * gran
    per_leaf: Counter[str] = Counter()
    for c in conts:
        per_leaf[anc[(c.first, 0)]] += c.units
    return sum(v // gran * gran for v in per_leaf.values())


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
    conts = eligible_containers(fabric, free, request, shape, health)
    if isinstance(conts, Unplaceable):
        return conts
    weights = CLASS_WEIGHTS[shape.job_class]
    single = _single(fabric, conts, shape, weights, health)
    if single is not None or shape.job_class == "single":
        return single or Unplaceable(
            "topology_fragmented", f"no single node has {shape.gpus} free GPUs (single-node job)")
    total = sum(c.units for c in conts)
    if total < shape.units:
        return Unplaceable("topology_fragmented",
                           f"{shape.units} groups of {shape.tp} NVLink GPUs needed, {total} available")
    depth = max(fabric.depth, 1)
    anc = {(c.first, h): (fabric.ancestor(c.first, h) if h < fabric.depth else "*")
           for c in conts for h in range(depth + 1)}
    rng = random.Random(seed)
    candidates: list[tuple[list[tuple[Container, int]], str]] = []
    grans = [shape.pp, 1] if shape.pp > 1 else [1]
    for gran in grans:
        for h in range(depth + 1):
            scopes: dict[str, list[Container]] = {}
            for c in conts:
                scopes.setdefault(anc[(c.first, h)], []).append(c)
            fitting = [(cap - shape.units, i, s) for i, (s, members) in enumerate(scopes.items())
                       if (cap := _cap(members, gran, h, anc)) >= shape.units]
            if not fitting:
                continue
            fitting.sort()
            picks = fitting[:_BEST_FIT_SCOPES]
            rest = fitting[_BEST_FIT_SCOPES:]
            picks += rng.sample(rest, min(_SAMPLED_SCOPES, len(rest)))
            for _slack, _i, scope in picks:
                alloc = _fill(fabric, scopes[scope], h - 1, shape.units, gran, anc)
                if alloc is not None:
                    candidates.append((alloc, scope))
            break
    if not candidates:
        return Unplaceable("topology_fragmented",
                           f"{total} groups of {shape.tp} free but none combine into {shape.units} "
                           f"with whole pipeline replicas")
    best: Placement | None = None
    seen: set[tuple[tuple[str, int], ...]] = set()
    for alloc, scope in candidates:
        key = tuple(sorted((c.name, k) for c, k in alloc))
        if key in seen:
            continue
        seen.add(key)
        p = layout(fabric, shape, alloc, weights, health)
        if best is None or p.cost < best.cost:
            best = Placement(p.gpus, p.ranks, p.cost, p.breakdown, p.job_class, scope, len(candidates))
    assert best is not None
    return best
