"""The locality cost of a rank layout (R-T4, R-T5, R-T6).

``Cost = Σ weight_k · term_k`` where each term sums a distance weight ``w(d)`` over the pairs of
GPUs that actually talk, not over all pairs: adjacent pipeline stages, neighbours on each
data-parallel ring, members of a tensor-parallel group. ``w`` grows geometrically with the tree
level (leaf 1, spine 3, core 9) because each level up shares more traffic per uplink; a degraded
path divides its weight by the path's bandwidth factor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement.types import RankSlot, ScoreWeights

__all__ = ["distance_weight", "score_layout"]


def distance_weight(d: int) -> float:
    """``w(d)``: 0 inside an NVLink domain, then 1, 3, 9, … per level (3x per level up)."""
    return 0.0 if d <= 0 else float(3 ** (d - 1))


def _edge(fabric: Fabric, a: RankSlot, b: RankSlot, health: LinkHealth | None) -> float:
    w = distance_weight(fabric.distance(a.node, b.node))
    if w and health is not None:
        factor = health.path_factor(fabric, (a.node, a.gpu), (b.node, b.gpu))
        w /= max(factor, 0.05)
    return w


def _ring(fabric: Fabric, members: Sequence[RankSlot], health: LinkHealth | None) -> float:
    """Σ w over a ring through ``members`` (already in topology order), closing the loop."""
    if len(members) < 2:
        return 0.0
    total = sum(_edge(fabric, members[i], members[i + 1], health) for i in range(len(members) - 1))
    if len(members) > 2:
        total += _edge(fabric, members[-1], members[0], health)
    return total


def _rail_breaks(fabric: Fabric, group: Sequence[RankSlot]) -> int:
    """Hops of the group's inter-node ring whose two nodes share no rail.

    Members on one node talk over NVLink, so only the node-to-node hops matter, and a hop stays
    on one rail when the two nodes hold the group on at least one common GPU index (NCCL then
    enters and leaves each node on that rail). Two nodes of one multi-node NVLink domain (an
    NVL72 rack) talk over NVLink too, never over a rail, so such a hop is no break.
    """
    rails: dict[str, set[int]] = {}
    for r in group:
        rails.setdefault(r.node, set()).add(r.gpu)
    if len(rails) < 2:
        return 0
    nodes = sorted(rails, key=fabric.index)
    hops = list(pairwise(nodes))
    if len(nodes) > 2:
        hops.append((nodes[-1], nodes[0]))
    return sum(1 for a, b in hops if not rails[a] & rails[b] and fabric.domain_of(a) != fabric.domain_of(b))


def score_layout(
    fabric: Fabric,
    ranks: Sequence[RankSlot],
    tp: int,
    pp: int,
    dp: int,
    weights: ScoreWeights,
    free_after: Mapping[str, int],
    health: LinkHealth | None = None,
) -> tuple[float, dict[str, float]]:
    """Weighted cost and its per-term breakdown for ``ranks`` (tp fastest, then pp, then dp)."""
    terms = dict.fromkeys(("tp", "rail", "pp", "dp", "pack"), 0.0)
    if tp > 1:
        for g in range(0, len(ranks), tp):
            group = ranks[g:g + tp]
            terms["tp"] += len({fabric.domain_of(r.node) for r in group}) - 1
    if pp > 1:
        # Stage s -> s+1 of each replica, through the tp-rank-0 representative.
        for d in range(dp):
            base = d * pp * tp
            for s in range(pp - 1):
                terms["pp"] += _edge(fabric, ranks[base + s * tp], ranks[base + (s + 1) * tp], health)
    if tp == 1 and pp == 1:
        # Pure DP: hierarchical all-reduce; nodes form the inter-node ring, local rank j of every
        # node forms the per-rail ring j.
        by_node: dict[str, list[RankSlot]] = {}
        for r in ranks:
            by_node.setdefault(r.node, []).append(r)
        heads = sorted((members[0] for members in by_node.values()), key=lambda r: fabric.index(r.node))
        terms["dp"] = _ring(fabric, heads, health)
        terms["rail"] = float(_rail_breaks(fabric, ranks))
    elif dp > 1:
        for s in range(pp):
            for t in range(tp):
                group = [ranks[d * pp * tp + s * tp + t] for d in range(dp)]
                if t == 0:
                    terms["dp"] += _ring(fabric, sorted(group, key=lambda r: fabric.index(r.node)), health)
                terms["rail"] += _rail_breaks(fabric, group) / tp
    terms["pack"] = float(sum(1 for left in free_after.values() if left > 0))
    breakdown = {
        "tp": weights.tp * terms["tp"],
        "rail": weights.rail * terms["rail"],
        "pp": weights.pp * terms["pp"],
        "dp": weights.dp * terms["dp"],
        "pack": weights.pack * terms["pack"],
    }
    return sum(breakdown.values()), breakdown
