"""The physical communication model: datasheet inputs, NCCL's algorithms, rails and PXN, link
health, fair sharing between concurrent collectives, and the published measurements."""

from __future__ import annotations

import random

import pytest

from railgang.topology.comm import DGX_A100, DGX_H100, allreduce_time, concurrent_allreduce
from railgang.topology.comm.hardware import NDR, ib_payload_efficiency
from railgang.topology.comm.model import GENERIC, params_for
from railgang.topology.comm.nccl import nvls_busbw
from railgang.topology.comm.network import fair_rates, link_capacity, path_links, ring_flows
from railgang.topology.comm.published import CASES, evaluate
from railgang.topology.comm_model import allreduce_time_s, ring_allreduce_time_s, step_comm_time_s
from railgang.topology.fabric import NodeFacts, fabric_from_shape
from railgang.topology.health import LinkHealth
from railgang.topology.occupancy import all_free
from railgang.topology.placement import GangRequest, Placement, place

BIG = fabric_from_shape(1250, 8, nodes_per_leaf=32, leaves_per_spine=8)
SMALL = fabric_from_shape(16, 8, nodes_per_leaf=4)


def whole(fabric, *idx: int, gpus: range = range(8)) -> list[tuple[str, int]]:  # type: ignore[no-untyped-def]
    return [(fabric.nodes[i], g) for i in idx for g in gpus]


# -- inputs are datasheet values -----------------------------------------------------------------


def test_inputs_come_from_specs_not_fits() -> None:
    assert DGX_H100.gpu.nvlink_gbps == pytest.approx(18 * 20.6)  # NCCL SM90_NVLINK_BW x 18 links
    assert DGX_A100.gpu.nvlink_gbps == pytest.approx(12 * 20.0)
    assert NDR.gbps == pytest.approx(400 / 8 * 4096 / 4122)  # IB framing at 4 KB MTU
    assert ib_payload_efficiency() == pytest.approx(0.9937, abs=1e-4)
    generic = fabric_from_shape(2, 8, 2)  # gpu_type "gpu": DGX H100 links, NVLS off (opt-in)
    assert params_for(generic) is GENERIC and not GENERIC.nvls
    facts = {n: NodeFacts(n, 8, gpu_type="A100-SXM4") for n in ("n01", "n02")}
    from railgang.topology.fabric import Fabric

    assert params_for(Fabric({"core": ["s1"]}, {"s1": ["n01", "n02"]}, facts)) is DGX_A100


# -- validation against published nccl-tests figures ---------------------------------------------

# The model's answer on each published case, as docs/topology.md and BENCHMARKS.md report it:
# within 15 % or a miss. The NVLS (5) and NVLS tree (7) cases are hits since NCCL's NVLS rule is
# modeled (-0.9 %, -1.9 %); the two misses are A100 systems their reporters call slow.
HITS = {0: True, 1: False, 2: True, 3: False, 4: True, 5: True, 6: True, 7: True}


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c.system for c in CASES])
def test_published_cases(i: int) -> None:
    r = evaluate(CASES[i])
    assert (abs(r.error) <= 0.15) is HITS[i], f"{CASES[i].system}: {r.error:+.1%}"
    assert CASES[i].source.startswith("https://github.com/NVIDIA/nccl-tests/issues/")


def _one_fabric(nodes: int, gpu_type: str, nvlink: bool = True):  # type: ignore[no-untyped-def]
    from railgang.topology.fabric import Fabric

    names = [f"n{i:02d}" for i in range(1, nodes + 1)]
    facts = {n: NodeFacts(n, 8, gpu_type=gpu_type, nvlink=nvlink) for n in names}
    return Fabric({"core": ["s1"]}, {"s1": names}, facts)


def test_nvls_follows_nccls_rule_on_nvswitch_gen3_only() -> None:
    one = _one_fabric(1, "H100-SXM5-80GB")
    t = allreduce_time(one, whole(one, 0), 8 * 2**30)
    assert t.algorithm == "nvls"
    # search.cc: 9 x bwIntra <= 18 x 20.6 -> 40 GB/s, pass 2 raises bwInter to 60; tuning.cc:
    # 8 channels x min(40 x 0.85 x 7/8 x 2, 60) = 476 GB/s
    f = ring_flows(one, whole(one, 0), DGX_H100)
    nv = nvls_busbw(float("inf"), f, DGX_H100)
    assert nv is not None and nv[0] == "nvls" and nv[2] == 8
    assert nv[1] == pytest.approx(8 * 40 * 0.85 * 7 / 8 * 2)
    two = _one_fabric(2, "H100-SXM5-80GB")
    t2 = allreduce_time(two, whole(two, 0, 1), 16 * 2**30)
    assert t2.algorithm == "nvls_tree"  # capped by perChMaxNVLSTreeBws[Hopper][2 nodes] = 57.7
    assert t2.busbw_gbps == pytest.approx(8 * 57.7, rel=0.01)
    four = _one_fabric(4, "H100-SXM5-80GB")
    assert allreduce_time(four, whole(four, 0, 1, 2, 3), 16 * 2**30).algorithm == "ring"  # 8 x 45.5 < ring
    # no NVLink SHARP: A100 (NVSwitch gen 2, SM80), PCIe H100, an unnamed GPU type, one GPU a node
    for fab in (_one_fabric(1, "A100-SXM4"), _one_fabric(1, "H100-PCIe", nvlink=False), SMALL):
        assert allreduce_time(fab, whole(fab, 0), 8 * 2**30).algorithm == "ring"
    assert allreduce_time(two, whole(two, 0, 1, gpus=range(1)), 8e9).algorithm in ("ring", "tree")
    with pytest.raises(ValueError, match="NVLink SHARP"):
        allreduce_time(SMALL, whole(SMALL, 0), 1e9, algorithm="nvls")


# -- bandwidth from the fabric ---------------------------------------------------------------------


def test_single_node_ring_runs_at_nvlink_speed() -> None:
    t = allreduce_time(SMALL, whole(SMALL, 0), 8 * 2**30, algorithm="ring")
    assert t.busbw_gbps == pytest.approx(DGX_H100.gpu.nvlink_gbps, rel=0.01)
    assert t.algorithm == "ring"


def test_nics_per_node_set_the_inter_node_bandwidth() -> None:
    nic = DGX_H100.nic.gbps
    full = allreduce_time(SMALL, whole(SMALL, 0, 1), 8e9)
    half = allreduce_time(SMALL, whole(SMALL, 0, 1, gpus=range(4)), 8e9)
    one = allreduce_time(SMALL, whole(SMALL, 0, 1, 2, 3, gpus=range(1)), 8e9)
    assert full.busbw_gbps == pytest.approx(DGX_H100.gpu.nvlink_gbps, rel=0.03)  # NVLink binds
    assert half.busbw_gbps == pytest.approx(4 * nic, rel=0.03)
    assert one.busbw_gbps == pytest.approx(nic, rel=0.03)
    assert full.channels == 8 and half.channels == 4 and one.channels == 1


def test_tree_for_small_messages_on_many_nodes_ring_for_large() -> None:
    gpus = whole(BIG, *range(0, 32 * 8, 32))
    assert allreduce_time(BIG, gpus, 64 * 1024).algorithm == "tree"
    assert allreduce_time(BIG, gpus, 1e9).algorithm == "ring"


def test_latency_grows_with_hops() -> None:
    near = allreduce_time(BIG, whole(BIG, 0, 1), 1024, algorithm="ring").seconds
    far = allreduce_time(BIG, whole(BIG, 0, 1249), 1024, algorithm="ring").seconds
    assert far > near


def test_seed_example_order_holds_without_being_fitted() -> None:
    rng = random.Random(0)
    leaf = whole(BIG, *range(8))
    aligned = whole(BIG, *range(0, 256, 32))
    rack = [(BIG.nodes[i], g) for i in range(16) for g in (range(4) if i % 2 == 0 else range(4, 8))]
    scattered = rng.sample([(n, g) for n in BIG.nodes for g in range(8)], 64)
    t = [ring_allreduce_time_s(BIG, s, 1e9) for s in (scattered, rack, aligned, leaf)]
    assert t[0] > t[1] > t[2] >= t[3]
    assert t[3] * 1e3 == pytest.approx(2 * 63 / 64 * 1e9 / (DGX_H100.gpu.nvlink_gbps * 1e9) * 1e3, rel=0.15)


# -- rails and PXN ---------------------------------------------------------------------------------


def test_cross_rail_without_pxn_climbs_to_the_spine() -> None:
    links, hops = path_links(SMALL, "n01", 0, "n02", 3)
    assert ("up", "s1", 0) in links and ("down", "s1", 3) in links and hops == 3
    same, hops_same = path_links(SMALL, "n01", 2, "n02", 2)
    assert not [link for link in same if link[0] in ("up", "down")] and hops_same == 1


def test_pxn_moves_cross_rail_sends_onto_the_destination_rail() -> None:
    # n01 -> n02 on channel 0 goes rail 0 -> rail 1; n01 has a GPU on rail 1, so PXN relays there
    gpus = [("n01", 0), ("n01", 1), ("n02", 1), ("n02", 2), ("n03", 0), ("n03", 2)]
    with_pxn = ring_flows(SMALL, gpus, DGX_H100)
    without = ring_flows(SMALL, gpus, DGX_H100.with_(pxn=False))
    assert with_pxn.pxn_hops > 0
    assert sum(u for k, u in with_pxn.usage.items() if k[0] == "up") < sum(
        u for k, u in without.usage.items() if k[0] == "up")


# -- link health --------------------------------------------------------------------------------------


def test_degraded_links_slow_the_ring() -> None:
    gpus = whole(BIG, *range(0, 256, 32))
    healthy = allreduce_time_s_gpus(gpus)
    lame_hca = allreduce_time_s_gpus(gpus, LinkHealth(hca={(BIG.nodes[32], 3): 0.5}))
    lame_spine = allreduce_time_s_gpus(gpus, LinkHealth(switches={"spine1": 0.5}))
    assert lame_hca > 1.5 * healthy and lame_spine > 1.5 * healthy
    inside = whole(BIG, 0, 1)
    assert allreduce_time_s_gpus(inside, LinkHealth(switches={"spine2": 0.5})) == allreduce_time_s_gpus(inside)


def allreduce_time_s_gpus(gpus: list[tuple[str, int]], health: LinkHealth | None = None) -> float:
    return ring_allreduce_time_s(BIG, gpus, 1e9, health=health)


# -- contention between jobs -------------------------------------------------------------------------


def test_jobs_sharing_an_oversubscribed_uplink_split_it_fairly() -> None:
    fabric = fabric_from_shape(8, 8, nodes_per_leaf=4)
    # leaf uplink: one NIC's worth per rail; ring sharing (NVLS tree would halve the 2-node
    # network load, tested in test_nvls_follows_nccls_rule_on_nvswitch_gen3_only)
    params = DGX_H100.with_(oversubscription=(4.0, 1.0), nvls=False)
    a = whole(fabric, 0, 4)
    b = whole(fabric, 1, 5)
    local = whole(fabric, 2, 3)
    alone = concurrent_allreduce(fabric, [a], 1e9, params=params)[0]
    shared = concurrent_allreduce(fabric, [a, b, local], 1e9, params=params)
    assert shared[0].busbw_gbps == pytest.approx(shared[1].busbw_gbps)
    # each rail switch's uplink carries one NIC's worth, split between a and b on every rail
    assert shared[0].busbw_gbps == pytest.approx(8 * DGX_H100.nic.gbps / 2, rel=0.03)
    assert alone.busbw_gbps > 1.5 * shared[0].busbw_gbps
    assert shared[2].seconds == pytest.approx(allreduce_time(fabric, local, 1e9, params=params).seconds)
    with_bg = allreduce_time(fabric, a, 1e9, params=params, background=[b])
    assert with_bg.seconds == pytest.approx(shared[0].seconds)


@pytest.mark.parametrize("seed", range(6))
def test_fair_share_never_overfills_a_link_and_each_job_has_a_bottleneck(seed: int) -> None:
    rng = random.Random(seed)
    fabric = fabric_from_shape(32, 8, nodes_per_leaf=8)
    params = DGX_H100.with_(oversubscription=(rng.choice([1.0, 2.0, 4.0]), 1.0))
    pool = [(n, g) for n in fabric.nodes for g in range(8)]
    rng.shuffle(pool)
    jobs = []
    for _ in range(rng.randint(2, 6)):
        size = rng.choice([2, 4, 8, 16])
        jobs.append(sorted(pool[:size]))
        del pool[:size]
    flows = [ring_flows(fabric, j, params) for j in jobs]
    cap = {k: link_capacity(fabric, params, k, None) for f in flows for k in f.usage}
    rates = fair_rates(flows, cap)
    load: dict[object, float] = {}
    for f, r in zip(flows, rates, strict=True):
        assert r > 0
        for k, u in f.usage.items():
            load[k] = load.get(k, 0.0) + u * r
    for k, v in load.items():
        assert v <= cap[k] * (1 + 1e-6)
    for f, r in zip(flows, rates, strict=True):  # max-min: capped, or on a full link where no one is faster
        if r >= f.cap * (1 - 1e-6):
            continue
        assert any(load[k] >= cap[k] * (1 - 1e-6) and all(
            r2 <= r * (1 + 1e-6) for f2, r2 in zip(flows, rates, strict=True) if k in f2.usage)
                   for k in f.usage)


# -- placement-level entry points ----------------------------------------------------------------------


def test_placement_level_functions() -> None:
    f = fabric_from_shape(16, 8, nodes_per_leaf=4)
    p = place(f, all_free(f), GangRequest(32, tp=8, pp=2, dp=2))
    assert isinstance(p, Placement)
    assert allreduce_time_s(f, p, 1e9) > 0
    step = step_comm_time_s(f, p, 8e9, 64e6)
    assert set(step) == {"tp", "pp", "dp", "total"}
    assert step["total"] == pytest.approx(step["tp"] + step["pp"] + step["dp"])
    assert step["tp"] < step["dp"]


def test_trivial_cases_are_zero() -> None:
    gpus = whole(BIG, 0)
    assert ring_allreduce_time_s(BIG, gpus[:1], 1e9) == 0.0
    assert ring_allreduce_time_s(BIG, gpus, 0) == 0.0
