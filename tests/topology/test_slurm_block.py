"""The transcribed Slurm 24.11 topology/block placement (benchmarks/baselines/slurm_block.py)
against what the real slurmctld 24.11 did on recorded states (benchmarks/slurm/block_states.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.baselines.slurm_block import (
    BlockLayout,
    exclusive_topo_usable,
    slurm_block_nodes,
)

DATA = Path(__file__).parent / "data" / "slurm_block_states.json"
# BlockSizes=18,72 and lighter loads: multi-rack gangs through eval_nodes_block's llblock path
SPARSE = Path(__file__).parent / "data" / "slurm_block_states_sparse.json"


def _doc(path: Path = DATA) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())  # missing data fails, never skips
    return doc


def layout_of(doc: dict[str, Any]) -> BlockLayout:
    racks, per = doc["racks"], doc["nodes_per_rack"]
    names = [f"n{i:02d}" for i in range(1, racks * per + 1)]
    return BlockLayout(tuple(tuple(names[r * per:(r + 1) * per]) for r in range(racks)), tuple(doc["block_sizes"]))


def usable_of(layout: BlockLayout, state: dict[str, Any]) -> set[str]:
    usable = {n for blk in layout.blocks for n in blk if not state["busy"].get(n) and n not in state["drained"]}
    if state["exclusive_topo"]:
        return exclusive_topo_usable(layout, usable, [n for n, k in state["busy"].items() if k])
    return usable


STATES = list(_doc()["states"])
SPARSE_STATES = list(_doc(SPARSE)["states"])


def test_the_recording_covers_placed_and_pending_gangs_and_segments() -> None:
    doc = _doc()
    assert doc["slurm"].startswith("24.11") and len(doc["states"]) >= 30
    assert any(s["slurmctld"] is None for s in STATES) and sum(1 for s in STATES if s["slurmctld"]) >= 20
    assert any(s["segment"] for s in STATES if s["slurmctld"])
    assert {s["slurmctld"] is None for s in STATES if s["exclusive_topo"]} == {True, False}


@pytest.mark.parametrize("state", STATES, ids=[f"{s['state']}-{s['gang'].split(' ')[0]}n" for s in STATES])
def test_transcription_matches_slurmctld_2411(state: dict[str, Any]) -> None:
    layout = layout_of(_doc())
    got = slurm_block_nodes(layout, usable_of(layout, state), state["nodes"], state["segment"])
    assert got == state["slurmctld"], state["gang"]


def test_the_sparse_recording_places_multi_rack_gangs() -> None:
    doc = _doc(SPARSE)
    assert doc["block_sizes"] == [18, 72] and len(SPARSE_STATES) >= 15
    per = doc["nodes_per_rack"]
    assert any(len({(int(n[1:]) - 1) // per for n in s["slurmctld"] or ()}) >= 2 for s in SPARSE_STATES)


@pytest.mark.parametrize("state", SPARSE_STATES, ids=[f"{s['state']}-{s['gang'].split(' ')[0]}n" for s in SPARSE_STATES])
def test_transcription_matches_slurmctld_2411_sparse_block_sizes(state: dict[str, Any]) -> None:
    layout = layout_of(_doc(SPARSE))
    got = slurm_block_nodes(layout, usable_of(layout, state), state["nodes"], state["segment"])
    assert got == state["slurmctld"], state["gang"]


def test_a_segment_larger_than_the_base_block_or_not_dividing_the_job_is_refused() -> None:
    layout = layout_of(_doc())
    every = {n for blk in layout.blocks for n in blk}
    assert slurm_block_nodes(layout, every, 36, 36) is None
    assert slurm_block_nodes(layout, every, 12, 5) is None
    assert slurm_block_nodes(layout, every, 12, 6) is not None


def test_segment_from_the_parallel_shape() -> None:
    from benchmarks.baselines.slurm_block import segment_size

    assert segment_size(16, 8, 4, 4, 18) == 8  # a tp8 x pp4 replica is 8 nodes of 4 GPUs
    assert segment_size(8, 8, 4, 4, 18) == 0  # one replica: the whole job, no segment
    assert segment_size(72, 8, 9, 4, 18) == 18
    assert segment_size(40, 8, 10, 4, 18) == 0  # a 20-node replica is larger than a rack
    assert segment_size(12, 4, 1, 8, 18) == 0  # tp4 on 8-GPU nodes: a replica is half a node
    assert segment_size(10, 8, 2, 4, 18) == 0  # 4-node replicas do not divide 10 nodes
