"""A compute node as the scheduler sees it (Slurm ``NodeName``): its GPUs, what state lets it
take work, its tags, tier, GPU facts and free room. Its own module so that what the snapshot's
index derives from nodes (``model/pool_map.py``) does not import the snapshot."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass

from railgang.daemon.core.model.needs import UNKNOWN_FACTS, GpuFacts
from railgang.daemon.core.model.room import Room


class NodeState(enum.StrEnum):
    """What a node can do for the scheduler (the value is what logs and the API show)."""

    IDLE = "idle"
    MIXED = "mixed"  # some GPUs allocated
    ALLOCATED = "alloc"
    DRAIN = "drain"  # draining or drained: runs what it has, takes nothing new
    DOWN = "down"  # down, failed or not responding

    usable: bool  # True when new work may be placed on the node

    def __init__(self, value: str) -> None:
        # whether new work may be placed, fixed per state
        self.usable = value not in ("drain", "down")

    @classmethod
    def parse(cls, text: str) -> NodeState:
        """A Slurm node state as ``sinfo``/``scontrol`` print it (``IDLE``, ``mix``, ``ALLOCATED``,
        ``IDLE+DRAIN``, ``DRAINING``, ``down*``, ``MIXED+COMPLETING``, ...) or one of our values.

        Drain and down flags win over the base state; a trailing ``*`` (not responding) means down.
        Raises ``ValueError`` for anything else (the caller names the node and the source).
        """
        raw = text.strip().lower()
        if not raw:
            raise ValueError("empty node state")
        words = [w.rstrip("*~#!%$@^-") for w in raw.split("+")]
        if words[0] not in _BASE and words[0] not in _DOWN and words[0] not in _DRAIN:
            raise ValueError(f"unknown node state {text.strip()!r} (expected one of Slurm's, "
                             "e.g. idle, mixed, allocated, drain, down)")
        if raw.endswith("*") or any(w in _DOWN for w in words):  # '*': not responding
            return cls.DOWN
        if any(w in _DRAIN for w in words):
            return cls.DRAIN
        return _BASE[words[0]]


_DOWN = frozenset({"down", "fail", "failing", "not_responding", "no_respond", "future", "futr",
                   "unknown", "unk"})
_DRAIN = frozenset({"drain", "drained", "draining", "drng"})
# base states; flags such as +maint, +reserved, +powered_down or a ``~`` suffix leave the base
# state as it is (Slurm itself decides who may run in a reservation or powers a node up)
_BASE = {"idle": NodeState.IDLE, "mix": NodeState.MIXED, "mixed": NodeState.MIXED,
         "alloc": NodeState.ALLOCATED, "allocated": NodeState.ALLOCATED,
         "comp": NodeState.ALLOCATED, "completing": NodeState.ALLOCATED,
         "plnd": NodeState.IDLE, "planned": NodeState.IDLE}


@dataclass(frozen=True)
class Node:
    """A compute node (Slurm ``NodeName``) as far as scheduling is concerned."""

    name: str
    gpus: int
    state: NodeState = NodeState.IDLE
    tags: frozenset[str] = frozenset()
    tier: str = ""  # capacity tier: "reserved", "on-demand", "spot" ("" = owned, no price)
    facts: GpuFacts = UNKNOWN_FACTS  # GPU type, memory, NVLink, interconnect (jobs' needs)
    room: Room | None = None  # free CPUs and memory (model/room.py); None: unknown, not checked

    def __post_init__(self) -> None:
        if not isinstance(self.state, NodeState):  # a Slurm string from an adapter: parse it once
            object.__setattr__(self, "state", NodeState.parse(str(self.state)))

    def with_state(self, state: NodeState) -> Node:
        return dataclasses.replace(self, state=state)

    def with_tag(self, tag: str) -> Node:
        return dataclasses.replace(self, tags=self.tags | {tag})


__all__ = ["Node", "NodeState"]
