"""What the simulated capacity costs and does per pool: GPU type speed, tier price, and the spot
interruption process (issue 13; ``pools.py`` builds the cluster, ``backend.py`` asks this).

- **Speed**: on a cluster of more than one GPU type a job advances at
  ``hetero.type_rate(job, type)`` (its measured rate relative to the type its work is counted in,
  else the core's table); on a one-type cluster always at 1.0, so such replays are unchanged.
- **Service**: attained GPU-seconds count ``rate on the type / rate on the job's fastest type``
  per GPU-second (effective throughput: what Tiresias queues and fair shares see).
- **Price**: USD per GPU-second of the node's (type, tier), charged while a job holds it, idle or
  not (checkpoint, restore and lost work are paid for like productive time).
- **Spot interruptions**: each spot node is reclaimed by a Poisson process of
  ``interruptions_per_node_day`` (seeded per node: ``random.Random("spot:<seed>:<node>")``, so a
  replay is reproducible and a node's reclaims do not depend on the policy). A reclaim signals the
  jobs on the node with the tier's notice as grace (they save a panic checkpoint when the notice
  covers the checkpoint cost, else lose the work since the last periodic one), takes the node away
  for notice + ``down_s`` (the replacement instance), then gives it back. The process runs only
  while some job runs (memoryless: pausing it while nothing runs changes nothing a running job
  sees, and lets the replay end).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from railgang.daemon.core.model.job import Assignment, JobRequest
from railgang.daemon.core.model.pools import type_rate
from railgang.daemon.core.model.tiers import SPOT, TierTerms

SPOT_RECLAIM = "spot_reclaim"
SPOT_RETURN = "spot_return"


class Capacity:
    """Per-node type, tier and price, and the spot process (one per replay)."""

    def __init__(self, fabric: Any, node_tier: Mapping[str, str], tiers: Mapping[str, TierTerms],
                 *, seed: int = 0, down_s: float = 600.0) -> None:
        self.type_of = {n: fabric.facts(n).gpu_type for n in fabric.nodes}
        self.gpus_of = {n: fabric.facts(n).gpus for n in fabric.nodes}
        self.tier_of = {n: node_tier.get(n, "") for n in fabric.nodes}
        self.tiers = dict(tiers)
        self.mixed = len(set(self.type_of.values())) > 1
        self.priced = any(t.usd_per_gpu_h for t in self.tiers.values())
        self.types = sorted(set(self.type_of.values()))
        self.down_s = down_s
        self.spot_nodes = [n for n in fabric.nodes if self.tier_of[n] == SPOT
                           and self.tiers.get(SPOT, TierTerms()).interruptions_per_node_day > 0]
        self._rng = {n: random.Random(f"spot:{seed}:{n}") for n in self.spot_nodes}
        self.paused: set[str] = set(self.spot_nodes)  # nodes whose process waits for work
        self.away: set[str] = set()  # reclaimed nodes, hidden from the core until they return

    @property
    def active(self) -> bool:
        """Anything beyond a one-type, unpriced, uninterrupted cluster?"""
        return self.mixed or self.priced or bool(self.spot_nodes)

    def pool(self, assignment: Assignment) -> str:
        """``type:tier`` of an assignment (its first node: a gang never spans pools)."""
        node = next(iter(assignment))
        return f"{self.type_of[node]}:{self.tier_of[node] or 'owned'}"

    def speed(self, request: JobRequest, assignment: Assignment) -> tuple[float, float]:
        """(rate factor, effective-service factor) of ``request`` on ``assignment``."""
        if not self.mixed:
            return 1.0, 1.0
        rate = min(type_rate(request, self.type_of[n]) for n in assignment)
        best = max(type_rate(request, t) for t in self.types)
        return rate, rate / best if best > 0 else 1.0

    def usd_per_gpu_s(self, assignment: Assignment) -> float:
        node = next(iter(assignment))
        terms = self.tiers.get(self.tier_of[node])
        return terms.price(self.type_of[node]) / 3600.0 if terms is not None else 0.0

    # -- the spot process ------------------------------------------------------------------------
    def next_reclaim(self, node: str, now: float) -> float:
        rate = self.tiers[SPOT].interruptions_per_node_day / 86400.0
        return now + self._rng[node].expovariate(rate)

    @property
    def notice_s(self) -> float:
        return self.tiers[SPOT].notice_s if SPOT in self.tiers else 0.0




def pool_report(records: Any, cap: Capacity, makespan_s: float) -> dict[str, Any]:
    """Per pool ("type:tier"), per GPU type and per tier: GPUs, GPU-hours held, allocated
    utilisation over the makespan, cost; in total: cost and spot interruptions. From the job
    records and the cluster's prices alone."""
    gpus_of: dict[str, int] = {}
    price_of: dict[str, float] = {}
    for node, gpu_type in cap.type_of.items():
        pool = f"{gpu_type}:{cap.tier_of[node] or 'owned'}"
        gpus_of[pool] = gpus_of.get(pool, 0) + cap.gpus_of[node]
        terms = cap.tiers.get(cap.tier_of[node])
        price_of[pool] = terms.price(gpu_type) if terms is not None else 0.0
    held = dict.fromkeys(gpus_of, 0.0)
    interruptions = 0
    for r in records:
        for pool, gpu_s in r.pool_gpu_s.items():
            held[pool] = held.get(pool, 0.0) + gpu_s
        interruptions += r.interruptions

    def row(gpus: int, gpu_s: float, usd: float) -> dict[str, Any]:
        util = gpu_s / (gpus * makespan_s) if gpus and makespan_s > 0 else None
        return {"gpus": gpus, "gpu_h": round(gpu_s / 3600, 3), "cost_usd": round(usd, 2),
                "allocated": None if util is None else round(util, 4)}

    pools: dict[str, Any] = {}
    by_type: dict[str, Any] = {}
    by_tier: dict[str, Any] = {}
    sums: dict[str, dict[str, list[float]]] = {"type": {}, "tier": {}}
    for pool in sorted(held):
        usd = held[pool] / 3600 * price_of.get(pool, 0.0)
        pools[pool] = row(gpus_of.get(pool, 0), held[pool], usd)
        gpu_type, tier = pool.split(":")
        for kind, key in (("type", gpu_type), ("tier", tier)):
            acc = sums[kind].setdefault(key, [0.0, 0.0, 0.0])
            acc[0] += gpus_of.get(pool, 0)
            acc[1] += held[pool]
            acc[2] += usd
    for kind, out in (("type", by_type), ("tier", by_tier)):
        for key, (g, s, usd) in sorted(sums[kind].items()):
            out[key] = row(int(g), s, usd)
    total = sum(r.cost_usd for r in records)
    return {"pools": pools, "by_type": by_type, "by_tier": by_tier,
            "cost_usd": round(total, 2), "interruptions": interruptions}


__all__ = ["SPOT_RECLAIM", "SPOT_RETURN", "Capacity", "pool_report"]
