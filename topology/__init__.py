"""Fabric model, InfiniBand link health and topology-aware gang placement (pure; no Slurm, no DB).

The names below are the public surface other packages code against; ``tests/topology/test_public_api.py``
pins it.
"""

from railgang.topology.comm_model import allreduce_time_s
from railgang.topology.fabric import Fabric, NodeFacts, fabric_from_shape, load_fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement import GangRequest, Placement, RankSlot, Unplaceable, place

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
