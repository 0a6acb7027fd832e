"""The locality cost of a rank layout."""

from __future__ import annotations

import pytest

from railgang.topology.fabric import fabric_from_shape
from railgang.topology.placement import CLASS_WEIGHTS, RankSlot, distance_weight, score_layout

F = fabric_from_shape(16, 8, nodes_per_leaf=4, leaves_per_spine=2)


@pytest.mark.parametrize(("d", "w"), [(0, 0.0), (1, 1.0), (2, 3.0), (3, 9.0)],
                         ids=["nvlink", "leaf", "spine", "core"])
def test_distance_weight(d: int, w: float) -> None:
    assert distance_weight(d) == w


def _dp(nodes_gpus: list[tuple[str, int]]) -> list[RankSlot]:
    return [RankSlot(n, g, 0, 0, d) for d, (n, g) in enumerate(nodes_gpus)]


def test_pure_dp_terms() -> None:
    aligned = _dp([("n01", 0), ("n01", 1), ("n02", 0), ("n02", 1)])
    crossed = _dp([("n01", 0), ("n01", 1), ("n02", 2), ("n02", 3)])
    far = _dp([("n01", 0), ("n01", 1), ("n16", 0), ("n16", 1)])
    w = CLASS_WEIGHTS["dp"]
    cost_a, br_a = score_layout(F, aligned, 1, 1, 4, w, {"n01": 6, "n02": 6})
    cost_c, br_c = score_layout(F, crossed, 1, 1, 4, w, {"n01": 6, "n02": 6})
    cost_f, _ = score_layout(F, far, 1, 1, 4, w, {"n01": 6, "n16": 6})
    assert br_a["rail"] == 0 and br_c["rail"] == w.rail
    assert cost_a < cost_c and cost_a < cost_f
    assert cost_a == pytest.approx(sum(br_a.values()))
    assert br_a["pack"] == 2 * w.pack


def test_3d_terms() -> None:
    # tp2 pp2 dp2: replica 0 on n01 (both stages), replica 1 split over n02 and n05.
    ranks = [RankSlot("n01", 0, 0, 0, 0), RankSlot("n01", 1, 1, 0, 0),
             RankSlot("n01", 2, 0, 1, 0), RankSlot("n01", 3, 1, 1, 0),
             RankSlot("n02", 0, 0, 0, 1), RankSlot("n02", 1, 1, 0, 1),
             RankSlot("n05", 2, 0, 1, 1), RankSlot("n05", 3, 1, 1, 1)]
    w = CLASS_WEIGHTS["3d"]
    cost, br = score_layout(F, ranks, 2, 2, 2, w, {})
    assert br["tp"] == 0
    assert br["pp"] == w.pp * 3.0  # n02 -> n05 crosses the spine
    assert br["dp"] == w.dp * (1.0 + 3.0)  # stage 0: n01-n02 (leaf), stage 1: n01-n05 (spine)
    assert br["rail"] == 0  # stage-1 peers share GPUs 2/3 on n01 and n05
    assert cost == pytest.approx(sum(br.values()))


def test_no_rail_break_between_nodes_of_one_multi_node_nvlink_domain() -> None:
    """Issue 21: inside an NVL72 rack DP peers talk over NVLink, whatever GPU index they hold
    (before, a whole-rack gang preferred an empty rack over whole nodes in a fuller one)."""
    from railgang.topology.conf import parse_topology
    from railgang.topology.fabric import fabric_from_conf
    from railgang.topology.placement.cost import _rail_breaks
    from railgang.topology.placement.types import RankSlot

    conf = parse_topology("BlockName=r1 Nodes=a[1-2]\nBlockName=r2 Nodes=b[1-2]\nBlockSizes=2,4\n")
    nvl = fabric_from_conf(conf, default_gpus=4, blocks_are_nvlink=True)
    plain = fabric_from_conf(conf, default_gpus=4)
    same_rack = [RankSlot("a1", 0, 0, 0, 0), RankSlot("a2", 1, 0, 0, 1)]
    two_racks = [RankSlot("a1", 0, 0, 0, 0), RankSlot("b1", 1, 0, 0, 1)]
    assert _rail_breaks(nvl, same_rack) == 0 and _rail_breaks(nvl, two_racks) == 1
    assert _rail_breaks(plain, same_rack) == 1
