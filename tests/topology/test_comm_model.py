"""Communication model: the seed's calibration, rail-aware rings, health, and step times."""

from __future__ import annotations

import random

import pytest

from railgang.topology.comm_model import (
    CommParams,
    allreduce_time_s,
    ring_allreduce_time_s,
    step_comm_time_s,
)
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.health import LinkHealth
from railgang.topology.occupancy import all_free
from railgang.topology.placement import GangRequest, Placement, place

BIG = fabric_from_shape(1250, 8, nodes_per_leaf=32, leaves_per_spine=8)


def _scenarios() -> dict[str, list[tuple[str, int]]]:
    nodes = BIG.nodes
    rng = random.Random(0)
    return {
        "single-leaf": [(nodes[i], g) for i in range(8) for g in range(8)],
        "rail-aligned": [(nodes[i * 32], g) for i in range(8) for g in range(8)],
        "rack-aware": [(nodes[i], g) for i in range(16) for g in (range(4) if i % 2 == 0 else range(4, 8))],
        "random": rng.sample([(n, g) for n in nodes for g in range(8)], 64),
    }


@pytest.mark.parametrize(
    ("name", "ms"),
    [("single-leaf", 25), ("rail-aligned", 40), ("rack-aware", 85), ("random", 120)],
    ids=["single-leaf", "rail-aligned", "rack-aware", "random"],
)
def test_calibrated_to_the_seed_example(name: str, ms: float) -> None:
    t = ring_allreduce_time_s(BIG, _scenarios()[name], 1e9) * 1e3
    assert t == pytest.approx(ms, rel=0.05)


def test_order_random_rack_rail_leaf() -> None:
    s = _scenarios()
    times = [ring_allreduce_time_s(BIG, s[k], 1e9) for k in ("random", "rack-aware", "rail-aligned", "single-leaf")]
    assert times == sorted(times, reverse=True)


def test_tp_over_nvlink_vs_infiniband() -> None:
    nvlink = ring_allreduce_time_s(BIG, [(BIG.nodes[0], g) for g in range(8)], 1e9)
    ib = ring_allreduce_time_s(BIG, [(BIG.nodes[i * 32], 0) for i in range(8)], 1e9)
    assert ib / nvlink > 8  # the seed: ~9x


def test_degraded_link_slows_the_ring() -> None:
    gpus = _scenarios()["rail-aligned"]
    healthy = ring_allreduce_time_s(BIG, gpus, 1e9)
    health = LinkHealth(hca={(BIG.nodes[32], 3): 0.5})
    assert ring_allreduce_time_s(BIG, gpus, 1e9, health=health) > 1.9 * healthy - 1e-3
    lame_spine = LinkHealth(switches={"spine1": 0.5})
    assert ring_allreduce_time_s(BIG, gpus, 1e9, health=lame_spine) > healthy


def test_rails_shared_around_the_whole_ring() -> None:
    f = fabric_from_shape(4, 8, 4)
    gpus = [("n01", g) for g in range(8)] + [("n02", g) for g in range(8)] + [("n03", g) for g in range(4)]
    aligned = ring_allreduce_time_s(f, gpus, 1e9)
    assert aligned * 1e3 == pytest.approx(25.5, abs=1.0)  # closes the loop on a shared rail
    crossed = [("n01", g) for g in range(4)] + [("n02", g) for g in range(4, 8)]
    assert ring_allreduce_time_s(f, crossed, 1e9) > 2 * ring_allreduce_time_s(f, crossed[:4] + [
        ("n02", g) for g in range(4)], 1e9)


def test_params_are_configurable_and_trivial_cases_are_zero() -> None:
    gpus = _scenarios()["rail-aligned"]
    slow = CommParams(ib_gbps=25.0)
    assert ring_allreduce_time_s(BIG, gpus, 1e9, params=slow) > ring_allreduce_time_s(BIG, gpus, 1e9)
    assert ring_allreduce_time_s(BIG, gpus[:1], 1e9) == 0.0
    assert ring_allreduce_time_s(BIG, gpus, 0) == 0.0


def test_placement_level_functions() -> None:
    f = fabric_from_shape(16, 8, nodes_per_leaf=4)
    p = place(f, all_free(f), GangRequest(32, tp=8, pp=2, dp=2))
    assert isinstance(p, Placement)
    assert allreduce_time_s(f, p, 1e9) > 0
    step = step_comm_time_s(f, p, 8e9, 64e6)
    assert set(step) == {"tp", "pp", "dp", "total"}
    assert step["total"] == pytest.approx(step["tp"] + step["pp"] + step["dp"])
    assert step["tp"] < step["dp"]
