"""Mixed clusters for the simulator: GPU pools by type and capacity tier, their prices, and the
fabric they form (``railgang sim --gpus v100=64,p100=64,k80=64,v100:spot=64``).

A pool is ``TYPE[:TIER]=GPUS``: GPUs of one type on one capacity tier (``reserved``, ``on-demand``
— the default — or ``spot``). Each pool gets its own nodes (``--gpus-per-node`` each, named
``<type>-<tier>-NNN``) under its own leaf switches (``--leaf`` nodes per leaf), all leaves under
one core switch: a gang never spans pools, so pools never share a leaf.

Prices (USD per GPU-hour, on-demand): :data:`ON_DEMAND_USD` by type (2020 cloud list prices for
the GPU alone; types it does not list cost the seed's $2). Reserved capacity costs
:data:`RESERVED_FACTOR` of on-demand (a one-year commitment), spot :data:`SPOT_FACTOR` (the
seed's 65 % discount). ``--price TYPE[:TIER]=USD`` overrides any of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from railgang.daemon.core.spot import ON_DEMAND, RESERVED, SPOT, TIERS, TierTerms
from railgang.daemon.errors import ConfigError
from railgang.topology.fabric import Fabric, NodeFacts

ON_DEMAND_USD: Mapping[str, float] = {"k80": 0.45, "p100": 1.46, "v100": 2.48, "t4": 0.35,
                                      "a100": 2.93, "h100": 4.0}
DEFAULT_USD = 2.0  # DESIGN R-S9's on-demand price
RESERVED_FACTOR = 0.6
SPOT_FACTOR = 0.35
GPU_MEM_GB: Mapping[str, float] = {"k80": 12.0, "p100": 16.0, "v100": 16.0, "t4": 16.0,
                                   "a100": 80.0, "h100": 80.0}
PCIE_ONLY = frozenset({"k80", "t4"})
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
    return tuple(pools.values())


def parse_prices(text: str | None) -> dict[tuple[str, str], float]:
    """``v100=2.48,v100:spot=0.9`` -> {(type, tier): USD per GPU-hour}."""
    out: dict[tuple[str, str], float] = {}
    for part in (p.strip().lower() for p in (text or "").split(",") if p.strip()):
        name, _, value = part.partition("=")
        gpu_type, _, tier = name.partition(":")
        try:
            usd = float(value)
        except ValueError:
            usd = -1.0
        if not gpu_type or usd < 0 or (tier and tier not in TIERS):
            raise ConfigError(f"--price: {part!r} is not TYPE[:TIER]=USD (e.g. v100:spot=0.9)")
        out[(gpu_type, tier or ON_DEMAND)] = usd
    return out


def price(gpu_type: str, tier: str, overrides: Mapping[tuple[str, str], float]) -> float:
    if (gpu_type, tier) in overrides:
        return overrides[(gpu_type, tier)]
    base = overrides.get((gpu_type, ON_DEMAND), ON_DEMAND_USD.get(gpu_type, DEFAULT_USD))
    return base * {RESERVED: RESERVED_FACTOR, SPOT: SPOT_FACTOR}.get(tier, 1.0)


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
            facts[node] = NodeFacts(node, gpus_per_node, pool.gpu_type,
                                    GPU_MEM_GB.get(pool.gpu_type, 80.0),
                                    nvlink=pool.gpu_type not in PCIE_ONLY)
            node_tier[node] = pool.tier
    fabric = Fabric({"core": list(leaf_nodes)}, leaf_nodes, facts,
                    name="mixed-" + ",".join(f"{p.name}={p.gpus}" for p in pools))
    overrides = dict(prices or {})
    tiers: dict[str, TierTerms] = {}
    for tier in sorted({p.tier for p in pools} | {ON_DEMAND}):
        by_type = {p.gpu_type: price(p.gpu_type, tier, overrides) for p in pools}
        spot = tier == SPOT
        tiers[tier] = TierTerms(by_type, spot_per_node_day if spot else 0.0,
                                spot_notice_s if spot else 0.0)
    return MixedCluster(pools, fabric, node_tier, tiers)


__all__ = ["DEFAULT_USD", "GPU_MEM_GB", "ON_DEMAND_USD", "RESERVED_FACTOR", "SPOT_FACTOR",
           "MixedCluster", "Pool", "mixed_cluster", "parse_pools", "parse_prices", "price"]
