"""Capacity tiers and spot routing (DESIGN R-S9): what a GPU-hour costs on each tier, and when a
job should leave spot for on-demand.

A pool's tier (``Node.tier``: ``reserved``, ``on-demand``, ``spot``; "" = owned, no price) has
:class:`TierTerms` in ``Snapshot.tiers``: a price per GPU-hour by GPU type and, for spot, an
interruption process (reclaims per node per day, notice before the reclaim).

Effective cost (the seed's equation 8.3)::

    C_eff = C_spot × T_total / T_productive
    T_total / T_productive = 1 + checkpoint_cost / checkpoint_interval + λ_job × restart / 1 day

with λ_job = reclaims per node per day × the job's nodes (any node's reclaim stops the gang) and
restart = restore time + the work lost per interruption: the checkpoint cost when the notice is
long enough for a panic checkpoint, else half a checkpoint interval on average.

Routing (:class:`SpotRules`): a big job (``min_gpus`` and up) may use a spot pool only while its
predicted interruptions stay at or under ``max_interruptions_per_day`` (DESIGN: about 4 a day for
big jobs), and any job only while spot's C_eff stays below the on-demand price of the same GPU
type; otherwise it goes to on-demand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from railgang.daemon.core.model.economics import interrupted_overhead
from railgang.daemon.core.model.job import Job
from railgang.topology.tiers import TIERS, Tier

DAY_S = 86400.0
SPOT, ON_DEMAND, RESERVED = Tier.SPOT, Tier.ON_DEMAND, Tier.RESERVED


@dataclass(frozen=True)
class TierTerms:
    """Price and, for spot, the interruption process of one capacity tier."""

    usd_per_gpu_h: Mapping[str, float] = field(default_factory=dict)  # by GPU type; "" = any type
    interruptions_per_node_day: float = 0.0  # spot reclaims per node per day (Poisson rate)
    notice_s: float = 0.0  # warning before a reclaim (AWS 120 s, GCP 30 s)

    def price(self, gpu_type: str) -> float:
        """USD per GPU-hour on ``gpu_type`` (0 when the tier prices nothing)."""
        return self.usd_per_gpu_h.get(gpu_type, self.usd_per_gpu_h.get("", 0.0))


def interruptions_per_day(job: Job, nodes: int, terms: TierTerms) -> float:
    """Predicted interruptions a day for ``job`` on ``nodes`` nodes of a tier."""
    return terms.interruptions_per_node_day * max(1, nodes)


def overhead(job: Job, nodes: int, terms: TierTerms) -> float:
    """T_total / T_productive of ``job`` on the tier (1.0 on a tier that is never reclaimed)."""
    if terms.interruptions_per_node_day <= 0:
        return 1.0
    ckpt = job.checkpoint_cost_s / job.checkpoint_interval_s if job.checkpoint_interval_s > 0 else 0.0
    lost = (job.checkpoint_cost_s if terms.notice_s >= job.checkpoint_cost_s
            else job.checkpoint_interval_s / 2)
    restart_s = job.restore_cost_s + lost
    return interrupted_overhead(ckpt, interruptions_per_day(job, nodes, terms), restart_s)


def effective_usd_per_gpu_h(job: Job, pool: tuple[str, str], nodes: int,
                            tiers: Mapping[str, TierTerms]) -> float:
    """C_eff per GPU-hour of ``job`` on ``pool`` = (GPU type, tier); 0 for an unpriced tier."""
    gpu_type, tier = pool
    terms = tiers.get(tier)
    if terms is None:
        return 0.0
    return terms.price(gpu_type) * overhead(job, nodes, terms)


@dataclass(frozen=True)
class SpotRules:
    """When a job leaves spot for on-demand."""

    max_interruptions_per_day: float = 4.0  # DESIGN R-S9: about 4 a day for big jobs
    min_gpus: int = 8  # "big" jobs (a node's worth and up) obey the cap; smaller ones restart
    # cheaply and stay on spot while its C_eff is below on-demand (the cost test still applies)
    cost_aware: bool = True  # False: route as if every tier cost the same (a baseline)

    def allows(self, job: Job, pool: tuple[str, str], nodes: int,
               tiers: Mapping[str, TierTerms]) -> bool:
        """May ``job`` run on ``pool`` (True for every tier that is not spot)?"""
        gpu_type, tier = pool
        terms = tiers.get(tier)
        if tier != SPOT or terms is None or not self.cost_aware:
            return True
        if job.gpus >= self.min_gpus and \
                interruptions_per_day(job, nodes, terms) > self.max_interruptions_per_day:
            return False
        od = tiers.get(ON_DEMAND)
        if od is None or od.price(gpu_type) <= 0:
            return True
        return effective_usd_per_gpu_h(job, pool, nodes, tiers) < od.price(gpu_type)


__all__ = ["DAY_S", "ON_DEMAND", "RESERVED", "SPOT", "TIERS", "SpotRules", "TierTerms",
           "effective_usd_per_gpu_h", "interruptions_per_day", "overhead"]
