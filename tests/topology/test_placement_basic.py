"""First contract tests of ``place``: exact counts, all-or-nothing, free GPUs only."""

from __future__ import annotations

from railgang.topology import GangRequest, Placement, Unplaceable, fabric_from_shape, place


def _all_free(fabric):  # type: ignore[no-untyped-def]
    return {n: frozenset(range(fabric.facts(n).gpus)) for n in fabric.nodes}


def test_small_job_packs_into_one_node() -> None:
    fabric = fabric_from_shape(16, 8, 4)
    p = place(fabric, _all_free(fabric), GangRequest(4))
    assert isinstance(p, Placement)
    assert list(p.gpus.values()) == [(0, 1, 2, 3)]


def test_gang_fills_one_leaf() -> None:
    fabric = fabric_from_shape(16, 8, 4)
    p = place(fabric, _all_free(fabric), GangRequest(32, tp=8, pp=2, dp=2))
    assert isinstance(p, Placement)
    assert {fabric.leaf_of(n) for n in p.gpus} == {"s1"}
    assert sum(len(v) for v in p.gpus.values()) == 32


def test_not_enough_gpus_is_data() -> None:
    fabric = fabric_from_shape(2, 8, 2)
    p = place(fabric, {"n01": frozenset({0, 1})}, GangRequest(4))
    assert isinstance(p, Unplaceable) and p.code == "insufficient_gpus"
