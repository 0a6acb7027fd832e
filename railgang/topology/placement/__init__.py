"""Topology-aware, all-or-nothing gang placement (R-T4 … R-T7).

``place(fabric, free, request)`` returns a ``Placement`` (node -> GPUs, a rank layout and its
cost) or an ``Unplaceable`` reason; it never raises for a request that merely does not fit.

The value types (``types``) are imported at once; the search and the cost model, which need the
fabric and networkx, on first use (PEP 562), so a module that only names the types (the core's
reasons, and through them ``railgang sim --help``) does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from railgang.topology.placement.types import (
    CLASS_WEIGHTS,
    GangRequest,
    JobClass,
    Placement,
    PlacementFailure,
    RankSlot,
    ScoreWeights,
    Unplaceable,
)

if TYPE_CHECKING:
    from railgang.topology.placement.cost import distance_weight, score_layout
    from railgang.topology.placement.search import place

_LAZY = {"distance_weight": "cost", "score_layout": "cost", "place": "search"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CLASS_WEIGHTS",
    "GangRequest",
    "JobClass",
    "Placement",
    "PlacementFailure",
    "RankSlot",
    "ScoreWeights",
    "Unplaceable",
    "distance_weight",
    "place",
    "score_layout",
]
