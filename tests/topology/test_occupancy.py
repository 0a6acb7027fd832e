"""Synthetic cluster states."""

from __future__ import annotations

import pytest

from railgang.topology.fabric import fabric_from_shape
from railgang.topology.occupancy import all_free, random_occupancy

F = fabric_from_shape(1000, 8, nodes_per_leaf=20)


@pytest.mark.parametrize("fraction", [0.0, 0.2, 0.5, 0.8, 1.0], ids=lambda f: f"busy-{f}")
def test_busy_fraction_is_about_right(fraction: float) -> None:
    free = random_occupancy(F, fraction, seed=3)
    busy = 1 - sum(len(g) for g in free.values()) / F.total_gpus
    assert busy == pytest.approx(fraction, abs=0.05)
    assert all(g and g <= frozenset(range(8)) for g in free.values())


def test_whole_free_nodes_remain_at_half_load() -> None:
    free = random_occupancy(F, 0.5, seed=1)
    assert sum(1 for g in free.values() if len(g) == 8) > 0.2 * len(F.nodes)


def test_seeded_and_validated() -> None:
    assert random_occupancy(F, 0.5, 9) == random_occupancy(F, 0.5, 9)
    assert random_occupancy(F, 0.5, 9) != random_occupancy(F, 0.5, 10)
    assert all_free(F)["n0001"] == frozenset(range(8))
    with pytest.raises(ValueError, match="within"):
        random_occupancy(F, 1.5)
