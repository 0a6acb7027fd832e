"""Fragmentation index (R-T9)."""

from __future__ import annotations

import pytest

from railgang.topology.fabric import fabric_from_shape
from railgang.topology.fragmentation import fragmentation_index
from railgang.topology.placement import GangRequest
from tests.topology.builders import free_map

F = fabric_from_shape(8, 8, nodes_per_leaf=4)


@pytest.mark.parametrize(
    ("spec", "gangs", "stranded", "index"),
    [
        ({"n01": "all", "n02": "all"}, [], 0, 0.0),
        ({"n01": "all", "n02": [0, 1, 2, 3]}, [], 4, 4 / 12),
        ({"n01": [0, 1, 2, 3], "n02": [0, 1, 2, 3]}, [GangRequest(8, job_class="dp")], 0, 0.0),
        ({"n01": [0, 1, 2, 3], "n02": [0, 1, 2, 3]}, [GangRequest(16, tp=8)], 8, 1.0),
        ({"n01": [0, 1, 2], "n02": "all"}, [GangRequest(4, tp=4)], 3, 3 / 11),
        ({}, [], 0, 0.0),
    ],
    ids=["whole-nodes", "half-node", "dp-uses-halves", "tp8-cannot", "tp4-blocks", "empty"],
)
def test_fragmentation(spec: dict[str, object], gangs: list[GangRequest], stranded: int, index: float) -> None:
    frag = fragmentation_index(F, free_map(F, spec), gangs)  # type: ignore[arg-type]
    assert frag.stranded_gpus == stranded
    assert frag.index == pytest.approx(index)
    assert frag.usable_gpus + frag.stranded_gpus == frag.free_gpus
