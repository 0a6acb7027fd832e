"""The Slurm 22.05 cons_tres + topology/tree baseline: the rules of _eval_nodes_topo by hand, and
states recorded on the real slurmctld of the local cluster replayed against the transcription."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.baselines.slurm_tree import slurm_tree_place, submission
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.occupancy import all_free
from railgang.topology.placement import GangRequest

FABRIC = fabric_from_shape(64, 8, nodes_per_leaf=8)
# Recorded by `benchmarks/slurm/slurm_placement_stream.py --mode states --record`: free GPUs after
# filler jobs, drained nodes, the request, and where the real slurmctld 22.05 started it.
# The first file (12 states, seed 1, 50 % busy) was used to correct the transcription; the second
# (18 states, seed 2, 60 % busy, two more gang shapes) was recorded afterwards and never tuned on.
DATA = Path(__file__).parent / "data"
RECORDED = [DATA / "slurm_tree_states.json", DATA / "slurm_tree_states_heldout.json"]


def free_with(busy: dict[str, int]) -> dict[str, frozenset[int]]:
    """All free except ``busy[node]`` GPUs (the lowest indices) on some nodes."""
    free = dict(all_free(FABRIC))
    for node, k in busy.items():
        free[node] = frozenset(range(k, 8))
    return free


def leaves_of(p) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted({FABRIC.leaf_of(n) for n in p.gpus})


def test_submission_form() -> None:
    assert submission(FABRIC, GangRequest(32, tp=8)) == (4, 8)
    assert submission(FABRIC, GangRequest(12)) == (0, 0)
    assert submission(FABRIC, GangRequest(24, tp=4, pp=2)) == (3, 8)


def test_whole_node_gang_takes_the_tightest_leaf_that_fits() -> None:
    # leaf 1 keeps 8 whole nodes, leaf 2 exactly 4, every other leaf 5
    busy = {n: 1 for n in FABRIC.nodes[8:12]}
    for start in range(16, 64, 8):
        busy.update({n: 1 for n in FABRIC.nodes[start:start + 3]})
    p = slurm_tree_place(FABRIC, free_with(busy), GangRequest(32, tp=8))
    assert p is not None and leaves_of(p) == ["s2"]


def test_when_no_leaf_fits_the_largest_goes_first_then_the_tightest() -> None:
    # every leaf has 2 whole nodes except leaf 3 (3 nodes) and leaf 6 (1 node)
    busy: dict[str, int] = {}
    keep = {0: 2, 1: 2, 2: 3, 3: 2, 4: 2, 5: 1, 6: 2, 7: 2}
    for leaf, k in keep.items():
        busy.update({n: 1 for n in FABRIC.nodes[leaf * 8 + k:leaf * 8 + 8]})
    p = slurm_tree_place(FABRIC, free_with(busy), GangRequest(32, tp=8))
    assert p is not None and leaves_of(p) == ["s3", "s6"]


def test_nodes_inside_a_leaf_in_name_order_not_best_fit() -> None:
    busy = {n: 1 for n in FABRIC.nodes[8:]}  # only leaf 1 has whole nodes
    p = slurm_tree_place(FABRIC, free_with(busy), GangRequest(16, tp=8))
    assert p is not None and list(p.gpus) == ["n01", "n02"]


def test_gpus_per_job_prefers_nodes_with_more_free_gpus_and_fills_in_node_order() -> None:
    busy = {n: 4 for n in FABRIC.nodes}  # everyone half free ...
    busy.update({"n20": 0, "n50": 0})    # ... except two whole nodes on different leaves
    p = slurm_tree_place(FABRIC, free_with(busy), GangRequest(12))
    assert p is not None and dict(p.gpus) == {"n20": tuple(range(8)), "n50": (0, 1, 2, 3)}


def test_drained_nodes_are_never_used_and_too_big_waits() -> None:
    drained = set(FABRIC.nodes[:8])
    p = slurm_tree_place(FABRIC, all_free(FABRIC), GangRequest(16, tp=8), drained=drained)
    assert p is not None and not set(p.gpus) & drained
    assert slurm_tree_place(FABRIC, all_free(FABRIC), GangRequest(8 * 64 - 7, tp=1), drained=drained) is None


def test_ranks_follow_gpu_order() -> None:
    p = slurm_tree_place(FABRIC, all_free(FABRIC), GangRequest(16, tp=8))
    assert p is not None
    assert [(r.node, r.gpu, r.tp_rank, r.dp_rank) for r in p.ranks[7:9]] == [("n01", 7, 7, 0), ("n02", 0, 0, 1)]


def _recorded(k: int) -> list[dict[str, object]]:
    if not RECORDED[k].exists():
        pytest.fail(f"{RECORDED[k]} is missing: it is part of the repository (recorded on slurmctld)")
    return list(json.loads(RECORDED[k].read_text()))


CASES = [(0, i) for i in range(12)] + [(1, i) for i in range(18)]


@pytest.mark.parametrize(("k", "i"), CASES, ids=[f"{'tuned' if k == 0 else 'heldout'}-{i}" for k, i in CASES])
def test_agrees_with_the_real_slurmctld(k: int, i: int) -> None:
    state = _recorded(k)[i]
    free = {n: frozenset(v) for n, v in state["free"].items()}  # type: ignore[attr-defined]
    r = state["request"]
    req = GangRequest(r["gpus"], tp=r["tp"], pp=r["pp"])  # type: ignore[index]
    p = slurm_tree_place(FABRIC, free, req, drained=state["drained"])  # type: ignore[arg-type]
    got = {n: list(g) for n, g in p.gpus.items()} if p is not None else None
    assert got == state["slurmctld"]
