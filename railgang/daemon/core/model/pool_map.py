"""The pools of a set of nodes: usable nodes grouped by (GPU type, capacity tier), with their GPUs
and largest node (``model/pools.py`` says what a pool is for). Apart from the rest of the pools'
rules because the snapshot's index (``model/snapshot.py``) derives them from its nodes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from railgang.daemon.core.model.node import Node

PoolKey = tuple[str, str]  # (GPU type, tier)


@dataclass(frozen=True)
class Pools:
    """The pools of one snapshot: nodes, GPUs and the largest node per (type, tier)."""

    nodes: Mapping[PoolKey, frozenset[str]]
    gpus: Mapping[PoolKey, int]
    node_gpus: Mapping[PoolKey, int]
    of_node: Mapping[str, PoolKey]

    @property
    def mixed(self) -> bool:
        return len(self.nodes) > 1

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(sorted({t for t, _ in self.nodes}))


def pools_of_nodes(nodes: Mapping[str, Node]) -> Pools:
    """The pools of ``nodes``: usable nodes grouped by (GPU type, tier)."""
    members: dict[PoolKey, set[str]] = {}
    gpus: dict[PoolKey, int] = {}
    biggest: dict[PoolKey, int] = {}
    of_node: dict[str, PoolKey] = {}
    for name, node in nodes.items():
        key = (node.facts.gpu_type, node.tier)
        of_node[name] = key
        if not node.state.usable:
            continue
        members.setdefault(key, set()).add(name)
        gpus[key] = gpus.get(key, 0) + node.gpus
        biggest[key] = max(biggest.get(key, 0), node.gpus)
    return Pools({k: frozenset(v) for k, v in sorted(members.items())}, gpus, biggest, of_node)


__all__ = ["PoolKey", "Pools", "pools_of_nodes"]
