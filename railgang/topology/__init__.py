"""Fabric model, InfiniBand link health and topology-aware gang placement (pure; no Slurm, no DB).

The names below are the public surface other packages code against; ``tests/topology/test_public_api.py``
pins it. They are imported on first use (PEP 562), so a light module of this package
(``railgang.topology.files``, the bounded file reader ``daemon/config.py`` uses) does not pay for
networkx and the placement engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from railgang.topology.comm_model import allreduce_time_s
    from railgang.topology.fabric import Fabric, NodeFacts, fabric_from_shape, load_fabric
    from railgang.topology.health import LinkHealth
    from railgang.topology.placement import GangRequest, Placement, RankSlot, Unplaceable, place

_HOME = {
    "allreduce_time_s": "comm_model",
    "Fabric": "fabric", "NodeFacts": "fabric", "fabric_from_shape": "fabric", "load_fabric": "fabric",
    "LinkHealth": "health",
    "GangRequest": "placement", "Placement": "placement", "RankSlot": "placement",
    "Unplaceable": "placement", "place": "placement",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Fabric",
    "GangRequest",
    "LinkHealth",
    "NodeFacts",
    "Placement",
    "RankSlot",
    "Unplaceable",
    "allreduce_time_s",
    "fabric_from_shape",
    "load_fabric",
    "place",
]
