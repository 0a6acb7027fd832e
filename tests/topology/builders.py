"""Small builders for topology tests: free maps from short specs."""

from __future__ import annotations

from collections.abc import Iterable

from railgang.topology.fabric import Fabric


def free_map(fabric: Fabric, spec: dict[str, Iterable[int] | str]) -> dict[str, frozenset[int]]:
    """``{"n01": "all", "n02": [0, 1]}`` -> node -> free GPU indices."""
    out: dict[str, frozenset[int]] = {}
    for node, gpus in spec.items():
        out[node] = frozenset(range(fabric.facts(node).gpus)) if gpus == "all" else frozenset(gpus)
    return out
