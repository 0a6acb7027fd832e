"""Topology-aware, all-or-nothing gang placement (R-T4 … R-T7).

``place(fabric, free, request)`` returns a ``Placement`` (node -> GPUs, a rank layout and its
cost) or an ``Unplaceable`` reason; it never raises for a request that merely does not fit.
"""

from railgang.topology.placement.cost import distance_weight, score_layout
from railgang.topology.placement.search import place
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
