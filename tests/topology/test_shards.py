"""Shard packing (issue 19 item 6; railgang/topology/shards.py)."""

from __future__ import annotations

import random

import pytest

from railgang.topology.shards import STRATEGIES, ShardSlot, footprint, place_shards

GPN = {"n000": 8, "n001": 8, "n002": 8}


def test_pack_fills_the_shared_gpu_with_the_fewest_free_shards_that_hold_the_job() -> None:
    used = {"n001": {0: 3, 1: 1}, "n002": {0: 2}}
    assert place_shards(used, GPN, 4, 1) == ShardSlot("n001", 0)  # 1 free: an exact fit
    assert place_shards(used, GPN, 4, 2) == ShardSlot("n002", 0)  # 2 free beats 3 free
    assert place_shards(used, GPN, 4, 3) == ShardSlot("n001", 1)


def test_pack_opens_a_fresh_gpu_on_the_fullest_node_never_a_free_node() -> None:
    used = {"n001": {0: 4, 1: 4}, "n002": {0: 4}}
    assert place_shards(used, GPN, 4, 4) == ShardSlot("n001", 2)


def test_first_fit_and_spread_are_the_baselines() -> None:
    used = {"n000": {0: 1}}
    assert place_shards(used, GPN, 4, 1, "first_fit") == ShardSlot("n000", 0)
    assert place_shards(used, GPN, 4, 1, "spread").node != "n000"


@pytest.mark.parametrize("need", [0, 5, -1])
def test_a_request_no_gpu_can_hold_is_refused(need: int) -> None:
    assert place_shards({}, GPN, 4, need) is None


def test_gpus_held_whole_by_other_work_are_never_shared() -> None:
    assert place_shards({}, {"n000": 2}, 4, 1, busy={"n000": 2}) is None
    assert place_shards({}, {"n000": 2}, 4, 1, busy={"n000": 1}) == ShardSlot("n000", 1)


@pytest.mark.parametrize("seed", range(5))
def test_no_gpu_is_overfilled_and_pack_strands_no_more_than_spread(seed: int) -> None:
    results = {}
    for strategy in STRATEGIES:
        r = random.Random(seed)
        used: dict[str, dict[int, int]] = {}
        live: list[tuple[str, int, int]] = []
        for _ in range(400):
            if live and r.random() < 0.45:
                node, gpu, n = live.pop(r.randrange(len(live)))
                used[node][gpu] -= n
                continue
            need = r.choice((1, 1, 2, 4))
            slot = place_shards(used, GPN, 4, need, strategy)
            if slot is None:
                continue
            used.setdefault(slot.node, {})
            used[slot.node][slot.gpu] = used[slot.node].get(slot.gpu, 0) + need
            assert used[slot.node][slot.gpu] <= 4
            live.append((slot.node, slot.gpu, need))
        results[strategy] = footprint(used, 4)
    assert results["pack"].stranded_gpus <= results["spread"].stranded_gpus
    assert results["pack"].nodes <= results["spread"].nodes


def test_footprint_counts() -> None:
    fp = footprint({"n000": {0: 4, 1: 1}, "n001": {0: 0}, "n002": {3: 2}}, 4)
    assert (fp.gpus, fp.partial, fp.nodes, fp.min_gpus, fp.stranded_gpus) == (3, 2, 2, 2, 1)
