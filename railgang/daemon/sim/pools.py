"""Mixed clusters for the simulator: GPU pools by type and capacity tier, their prices, and the
fabric they form (``railgang sim --gpus v100=64,p100=64,k80=64,v100:spot=64``).

A pool is ``TYPE[:TIER]=GPUS``: GPUs of one type on one capacity tier (``reserved``, ``on-demand``
— the default — or ``spot``). Each pool gets its own nodes (``--gpus-per-node`` each, named
``<type>-<tier>-NNN``) under its own leaf switches (``--leaf`` nodes per leaf), all leaves under
one core switch: a gang never spans pools, so pools never share a leaf.

Prices come from :mod:`railgang.daemon.pricing` (``--price TYPE[:TIER]=USD`` overrides them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from railgang.daemon.core.model.tiers import ON_DEMAND, TIERS, TierTerms
from railgang.daemon.pricing import tier_terms
from railgang.errors import ConfigError
from railgang.topology.fabric import Fabric, NodeFacts
from railgang.topology.node_facts import node_facts

MAX_NODES = 100_000  # the largest fabric `railgang topology generate` builds too
_POOL = re.compile(r"^([a-z0-9][a-z0-9_.\-]*)(?::([a-z\-]+))?=(\d+)$")


@dataclass(frozen=True)
class Pool:
    gpu_type: str
    tier: str
    gpus: int

    @property
    def name(self) -> str:
        return f"{self.gpu_type}-{self.tier}"


@dataclass(frozen=True)
class MixedCluster:
    """What ``--gpus`` builds: the fabric, each node's tier, the tiers' terms."""

    pools: tuple[Pool, ...]
    fabric: Fabric
    node_tier: Mapping[str, str]
    tiers: Mapping[str, TierTerms]


def parse_pools(text: str, gpus_per_node: int) -> tuple[Pool, ...]:
    """``v100=64,p100=64,k80:spot=32`` -> pools (one line of error for anything else)."""
    pools: dict[tuple[str, str], Pool] = {}
    for part in (p.strip().lower() for p in text.split(",")):
        m = _POOL.match(part)
        if not part or m is None:
            raise ConfigError(f"--gpus: {part!r} is not TYPE[:TIER]=GPUS (e.g. v100=64,k80:spot=32)")
        gpu_type, tier, count = m.group(1), m.group(2) or ON_DEMAND, int(m.group(3))
        if tier not in TIERS:
            raise ConfigError(f"--gpus: unknown tier {tier!r} in {part!r}; known: {', '.join(TIERS)}")
        if count < 1 or count % gpus_per_node:
            raise ConfigError(f"--gpus: {part!r}: GPUs must be a positive multiple of "
                              f"--gpus-per-node ({gpus_per_node})")
        if (gpu_type, tier) in pools:
            raise ConfigError(f"--gpus: pool {gpu_type}:{tier} given twice")
        pools[(gpu_type, tier)] = Pool(gpu_type, tier, count)
    nodes = sum(p.gpus for p in pools.values()) // gpus_per_node
    if nodes > MAX_NODES:  # each node is an object in the fabric: refuse before building it
        raise ConfigError(f"--gpus: {nodes:,} nodes in all; the simulator takes at most {MAX_NODES:,}")
    return tuple(pools.values())


def mixed_cluster(pools: tuple[Pool, ...], gpus_per_node: int, nodes_per_leaf: int, *,
                  prices: Mapping[tuple[str, str], float] | None = None,
                  spot_per_node_day: float = 0.0, spot_notice_s: float = 120.0) -> MixedCluster:
    """The fabric of ``pools`` and the terms of their tiers."""
    if gpus_per_node < 1 or nodes_per_leaf < 1:
        raise ConfigError("--gpus-per-node and --leaf must be positive")
    leaf_nodes: dict[str, list[str]] = {}
    facts: dict[str, NodeFacts] = {}
    node_tier: dict[str, str] = {}
    for pool in pools:
        count = pool.gpus // gpus_per_node
        for i in range(count):
            node = f"{pool.name}-{i + 1:03d}"
            leaf_nodes.setdefault(f"{pool.name}-s{i // nodes_per_leaf + 1}", []).append(node)
            facts[node] = node_facts(node, gpus_per_node, pool.gpu_type)  # as the daemon's
            node_tier[node] = pool.tier
    fabric = Fabric({"core": list(leaf_nodes)}, leaf_nodes, facts,
                    name="mixed-" + ",".join(f"{p.name}={p.gpus}" for p in pools))
    tiers = tier_terms((p.gpu_type for p in pools), (p.tier for p in pools), prices or {},
                       spot_per_node_day=spot_per_node_day, spot_notice_s=spot_notice_s)
    return MixedCluster(pools, fabric, node_tier, tiers)


__all__ = ["MAX_NODES", "MixedCluster", "Pool", "mixed_cluster", "parse_pools"]
