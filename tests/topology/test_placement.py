"""Placement engine: behaviour tables, reasons as data, and invariants over random cluster states."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.topology.fabric import Fabric, NodeFacts, fabric_from_shape
from railgang.topology.health import LinkHealth
from railgang.topology.occupancy import all_free, random_occupancy
from railgang.topology.placement import GangRequest, Placement, Unplaceable, place
from tests.topology.builders import free_map

FABRIC = fabric_from_shape(16, 8, nodes_per_leaf=4, leaves_per_spine=2)


def _placed(result: Placement | Unplaceable) -> Placement:
    assert isinstance(result, Placement), result
    return result


# -- behaviour --------------------------------------------------------------------------------


def test_single_job_best_fits_a_partly_used_node() -> None:
    free = free_map(FABRIC, {"n01": "all", "n02": [4, 5, 6, 7], "n05": [0, 1, 2, 3, 4, 5]})
    p = _placed(place(FABRIC, free, GangRequest(4)))
    assert dict(p.gpus) == {"n02": (4, 5, 6, 7)}
    assert p.job_class == "single"


def test_single_job_takes_an_aligned_window_next_to_busy_gpus() -> None:
    free = free_map(FABRIC, {"n01": [1, 2, 3, 4, 5, 6, 7]})
    p = _placed(place(FABRIC, free, GangRequest(2)))
    assert dict(p.gpus) == {"n01": (2, 3)}  # keeps the aligned 4-block 4..7 whole


def test_single_job_does_not_span_nodes() -> None:
    free = free_map(FABRIC, {"n01": [0, 1], "n02": [0, 1]})
    r = place(FABRIC, free, GangRequest(4, job_class="single"))
    assert isinstance(r, Unplaceable) and r.code == "topology_fragmented"
    assert isinstance(place(FABRIC, free, GangRequest(4, job_class="dp")), Placement)


def test_3d_job_tp_in_node_pp_in_leaf_dp_across() -> None:
    p = _placed(place(FABRIC, all_free(FABRIC), GangRequest(64, tp=8, pp=4, dp=2)))
    for slot in p.ranks:
        assert slot.gpu == slot.tp_rank  # tp rank t on GPU t: every DP group on one rail
    by_replica: dict[int, set[str]] = {}
    for slot in p.ranks:
        by_replica.setdefault(slot.dp_rank, set()).add(FABRIC.leaf_of(slot.node))
    assert all(len(leaves) == 1 for leaves in by_replica.values())
    assert p.breakdown["tp"] == 0 and p.breakdown["rail"] == 0


def test_3d_prefers_whole_replicas_per_leaf() -> None:
    # 3 free nodes in every leaf: a pp=2 replica must not straddle two leaves.
    spec: dict[str, object] = {n: "all" for n in FABRIC.nodes if int(n[1:]) % 4 != 0}
    free = free_map(FABRIC, spec)  # type: ignore[arg-type]
    p = _placed(place(FABRIC, free, GangRequest(32, tp=8, pp=2, dp=2)))
    for d in (0, 1):
        nodes = {s.node for s in p.ranks if s.dp_rank == d}
        assert len({FABRIC.leaf_of(n) for n in nodes}) == 1


def test_dp_job_prefers_rail_aligned_nodes() -> None:
    free = free_map(FABRIC, {"n01": [0, 1, 2, 3], "n02": [4, 5, 6, 7], "n03": [0, 1, 2, 3]})
    p = _placed(place(FABRIC, free, GangRequest(8, job_class="dp")))
    assert set(p.gpus) == {"n01", "n03"}
    assert p.breakdown["rail"] == 0


def test_gang_stays_under_lowest_switch_that_fits() -> None:
    free = {n: g for n, g in all_free(FABRIC).items() if n not in ("n01", "n02")}
    p = _placed(place(FABRIC, free, GangRequest(32, tp=8)))
    assert {FABRIC.leaf_of(n) for n in p.gpus} in ({"s2"}, {"s3"}, {"s4"})


def test_deterministic_for_a_seed() -> None:
    free = random_occupancy(FABRIC, 0.5, seed=3)
    req = GangRequest(24, tp=4, pp=2, dp=3)
    assert place(FABRIC, free, req, seed=7) == place(FABRIC, free, req, seed=7)


REASONS = [
    ("bad-product", GangRequest(10, tp=4), "invalid_request"),
    ("zero", GangRequest(0), "invalid_request"),
    ("tp-too-wide", GangRequest(16, tp=16), "invalid_request"),
    ("too-big", GangRequest(256), "insufficient_gpus"),
    ("memory", GangRequest(8, min_gpu_mem_gb=100.0), "gpu_memory"),
]


@pytest.mark.parametrize(("req", "code"), [r[1:] for r in REASONS], ids=[r[0] for r in REASONS])
def test_reasons_are_data(req: GangRequest, code: str) -> None:
    free = free_map(FABRIC, {"n01": "all", "n02": "all"})
    result = place(FABRIC, free, req)
    assert isinstance(result, Unplaceable) and result.code == code and result.detail


def _with_facts(fabric: Fabric, **changes: object) -> Fabric:
    facts = {n: replace(fabric.facts(n), **changes) for n in fabric.nodes}  # type: ignore[arg-type]
    children = {s: list(fabric.children(s)) for s in fabric.switches}
    leaves = {s: list(fabric.direct_nodes(s)) for s in fabric.switches if fabric.direct_nodes(s)}
    return Fabric(children, leaves, facts)


def test_pcie_nodes_cannot_host_tensor_parallel() -> None:
    pcie = _with_facts(FABRIC, nvlink=False)
    r = place(pcie, all_free(pcie), GangRequest(16, tp=8))
    assert isinstance(r, Unplaceable) and r.code == "no_nvlink_domain"
    assert isinstance(place(pcie, all_free(pcie), GangRequest(16)), Placement)


def test_quarantined_nodes_only_for_single_node_jobs() -> None:
    free = free_map(FABRIC, {"n01": "all", "n02": "all"})
    health = LinkHealth(quarantined={"n02": "lame link mlx5_3"})
    r = place(FABRIC, free, GangRequest(16, tp=8), health=health)
    assert isinstance(r, Unplaceable) and r.code == "quarantined"
    single = _placed(place(FABRIC, free_map(FABRIC, {"n02": "all"}), GangRequest(8), health=health))
    assert set(single.gpus) == {"n02"}


def test_degraded_leaf_is_avoided() -> None:
    health = LinkHealth(switches={"s1": 0.3})
    p = _placed(place(FABRIC, all_free(FABRIC), GangRequest(32, tp=8, pp=4, dp=1), health=health))
    assert "s1" not in {FABRIC.leaf_of(n) for n in p.gpus}


def test_multi_node_nvlink_domain_hosts_wide_tp() -> None:
    facts = {n: NodeFacts(n, gpus=4, nvlink_domain="rack1" if i < 4 else "rack2")
             for i, n in enumerate(f"g{i}" for i in range(8))}
    fabric = Fabric({"top": ["l1", "l2"]}, {"l1": list(facts)[:4], "l2": list(facts)[4:]}, facts)
    p = _placed(place(fabric, all_free(fabric), GangRequest(32, tp=16)))
    for t in range(2):
        group = [s for s in p.ranks if s.dp_rank == t]
        assert len({fabric.domain_of(s.node) for s in group}) == 1


# -- invariants ---------------------------------------------------------------------------------

SHAPES = [GangRequest(g, tp=t, pp=p) for g, t, p in [
    (1, 1, 1), (2, 2, 1), (4, 1, 1), (8, 8, 1), (8, 2, 2), (12, 1, 1), (16, 8, 1), (16, 4, 2),
    (24, 8, 1), (32, 8, 2), (32, 2, 4), (48, 1, 1), (64, 8, 4),
]]


def _check(fabric: Fabric, free: dict[str, frozenset[int]], req: GangRequest,
           result: Placement | Unplaceable) -> None:
    free_total = sum(len(v) for v in free.values())
    if isinstance(result, Unplaceable):
        if result.code == "insufficient_gpus":
            assert free_total < req.gpus
        if req.pp == 1 and req.job_class != "single" and result.code == "topology_fragmented":
            units = sum(len(v) // req.tp for v in free.values())
            assert units * req.tp < req.gpus or req.gpus <= 8
        return
    used = [(s.node, s.gpu) for s in result.ranks]
    assert len(used) == req.gpus == len(set(used)), "exact count, no double booking"
    assert all(g in free[n] for n, g in used), "only free GPUs"
    assert Counter(n for n, _ in used) == Counter({n: len(v) for n, v in result.gpus.items()})
    dp = req.gpus // (req.tp * req.pp)
    assert {(s.tp_rank, s.pp_stage, s.dp_rank) for s in result.ranks} == {
        (t, p, d) for t in range(req.tp) for p in range(req.pp) for d in range(dp)}
    for p in range(req.pp):
        for d in range(dp):
            group = {fabric.domain_of(s.node) for s in result.ranks if (s.pp_stage, s.dp_rank) == (p, d)}
            assert len(group) == 1, "TP group inside one NVLink domain"


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 10_000), occ=st.floats(0.0, 0.95), shape=st.sampled_from(SHAPES))
def test_invariants_on_random_states(seed: int, occ: float, shape: GangRequest) -> None:
    free = random_occupancy(FABRIC, occ, seed)
    _check(FABRIC, free, shape, place(FABRIC, free, shape, seed=seed))


@pytest.mark.parametrize("seed", range(20))
def test_invariants_on_speckled_states(seed: int) -> None:
    rng = random.Random(seed)
    free = {n: frozenset(i for i in range(8) if rng.random() < 0.6) for n in FABRIC.nodes}
    for shape in SHAPES:
        _check(FABRIC, free, shape, place(FABRIC, free, shape, seed=seed))


def test_all_or_nothing_when_capacity_is_split() -> None:
    free = free_map(FABRIC, {n: [0, 1, 2, 3] for n in FABRIC.nodes[:4]})
    r = place(FABRIC, free, GangRequest(16, tp=8))
    assert isinstance(r, Unplaceable) and r.code == "topology_fragmented"


def test_unknown_nodes_and_indices_are_ignored() -> None:
    free = {"ghost": frozenset({0}), "n01": frozenset({0, 1, 99, -1})}
    p = _placed(place(FABRIC, free, GangRequest(2)))
    assert dict(p.gpus) == {"n01": (0, 1)}


@settings(max_examples=300, deadline=None)
@given(
    gpus=st.integers(-2, 80), tp=st.integers(-1, 10), pp=st.integers(-1, 5),
    dp=st.one_of(st.none(), st.integers(-1, 20)),
    job_class=st.sampled_from([None, "3d", "dp", "single"]),
    mem=st.floats(0, 200), nvlink=st.booleans(),
    free=st.dictionaries(st.sampled_from([*FABRIC.nodes[:8], "ghost"]),
                         st.frozensets(st.integers(-3, 12), max_size=10), max_size=9),
)
def test_place_never_raises(gpus: int, tp: int, pp: int, dp: int | None, job_class: str | None,
                            mem: float, nvlink: bool, free: dict[str, frozenset[int]]) -> None:
    req = GangRequest(gpus, tp, pp, dp, job_class, mem, nvlink)  # type: ignore[arg-type]
    result = place(FABRIC, free, req)
    assert isinstance(result, Placement | Unplaceable)
    if isinstance(result, Placement):
        valid = {n: {i for i in g if 0 <= i < 8} for n, g in free.items() if n in FABRIC}
        assert all(s.gpu in valid[s.node] for s in result.ranks)
        assert len({(s.node, s.gpu) for s in result.ranks}) == len(result.ranks) == gpus


def test_unbalanced_tree() -> None:
    # A leaf straight under the core next to a spine with two leaves.
    nodes = {f"u{i}": NodeFacts(f"u{i}") for i in range(12)}
    names = list(nodes)
    fabric = Fabric({"core": ["lone", "spine"], "spine": ["l1", "l2"]},
                    {"lone": names[:4], "l1": names[4:8], "l2": names[8:]}, nodes)
    assert fabric.distance("u0", "u4") == 3 and fabric.distance("u4", "u8") == 2
    for req in (GangRequest(64, tp=8, pp=2), GangRequest(40, job_class="dp"), GangRequest(96, tp=8)):
        free = all_free(fabric)
        _check(fabric, free, req, place(fabric, free, req))
    p = _placed(place(fabric, all_free(fabric), GangRequest(64, tp=8, pp=2)))
    assert {fabric.leaf_of(n) for n in p.gpus} == {"l1", "l2"}  # one spine beats lone + core


def test_disconnected_trees_still_place_across_roots() -> None:
    nodes = {f"d{i}": NodeFacts(f"d{i}") for i in range(4)}
    fabric = Fabric({}, {"a": ["d0", "d1"], "b": ["d2", "d3"]}, nodes)
    assert fabric.roots == ("a", "b") and fabric.distance("d0", "d2") == fabric.depth + 1
    p = _placed(place(fabric, all_free(fabric), GangRequest(32, tp=8)))
    assert len(p.gpus) == 4


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 10_000), shape=st.sampled_from(SHAPES),
       lame=st.sets(st.sampled_from(FABRIC.nodes), max_size=6))
def test_quarantined_nodes_never_host_gangs(seed: int, shape: GangRequest, lame: set[str]) -> None:
    free = random_occupancy(FABRIC, 0.3, seed)
    health = LinkHealth(quarantined=dict.fromkeys(lame, "lame"))
    result = place(FABRIC, free, shape, health=health)
    if isinstance(result, Placement) and result.job_class != "single":
        assert not set(result.gpus) & lame


def test_pure_dp_rank_r_on_gpu_r_mod_8() -> None:
    p = _placed(place(FABRIC, all_free(FABRIC), GangRequest(16, job_class="dp")))
    assert [s.gpu for s in p.ranks] == [r % 8 for r in range(16)]
    assert [s.dp_rank for s in p.ranks] == list(range(16))


def test_tp4_dp_peers_share_rails_across_nodes() -> None:
    p = _placed(place(FABRIC, all_free(FABRIC), GangRequest(16, tp=4, dp=4)))
    assert len(p.gpus) == 2
    for t in range(4):
        by_node: dict[str, set[int]] = {}
        for s in p.ranks:
            if s.tp_rank == t:
                by_node.setdefault(s.node, set()).add(s.gpu)
        a, b = by_node.values()
        assert a & b  # the inter-node hop of every DP group stays on one rail
