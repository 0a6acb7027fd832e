"""LinkHealth lookups."""

from __future__ import annotations

from railgang.topology.fabric import fabric_from_shape
from railgang.topology.health import LinkHealth

F = fabric_from_shape(16, 8, nodes_per_leaf=4, leaves_per_spine=2)


def test_defaults_are_healthy() -> None:
    h = LinkHealth()
    assert h.healthy and h.port_factor("n01", 0) == 1.0
    assert h.path_factor(F, ("n01", 0), ("n16", 0)) == 1.0


def test_path_factor_is_the_worst_port_or_switch_on_the_path() -> None:
    h = LinkHealth(hca={("n01", 2): 0.5}, switches={"spine2": 0.25})
    assert not h.healthy
    assert h.path_factor(F, ("n01", 2), ("n02", 2)) == 0.5
    assert h.path_factor(F, ("n01", 3), ("n02", 3)) == 1.0
    assert h.path_factor(F, ("n01", 3), ("n16", 3)) == 0.25  # via spine2
    assert h.path_factor(F, ("n01", 2), ("n01", 5)) == 1.0  # inside a node: NVLink


def test_quarantine_lookup() -> None:
    h = LinkHealth(quarantined={"n03": "lame link mlx5_1 port 1"})
    assert h.is_quarantined("n03") and not h.is_quarantined("n04") and not h.healthy
