"""What a simulated cluster is told about its jobs and capacity (``SimBackend``'s settings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from railgang.daemon.core.model.quota import QuotaTree
from railgang.daemon.core.model.tiers import TierTerms
from railgang.daemon.sim.degrade import LinkEvent


@dataclass(frozen=True, slots=True)
class SimConfig:
    comm_share: float = 0.2  # all-reduce share of a step, multi-node jobs (progress.py)
    checkpoint_interval_s: float = 1800.0
    checkpoint_cost_s: float = 60.0
    restore_cost_s: float = 120.0  # reload + warm-up after a restart
    transition_cost_s: float = 30.0  # no progress for this long after a resize
    panic_checkpoint: bool = False  # a signalled job saves if grace >= checkpoint cost
    preempt_window_s: float = 3600.0  # how much preemption history snapshots carry
    # the fair-share input's half-life (core/model/fairshare.py): Slurm's PriorityDecayHalfLife
    # default, as the daemon's when slurm.conf says nothing; 0 = no decay
    fair_share_half_life_s: float = 7 * 86400.0
    oracle: bool = True  # tell the core the exact work left (a real cluster only estimates it)
    quotas: QuotaTree | None = None  # the hierarchical quota tree (``--quotas``); None = none
    enforce_quotas: bool = True  # False: only measure attainment against the tree (a baseline)
    degrade: tuple[LinkEvent, ...] = ()  # ``--degrade``: switch factors changing over time
    # typed and priced capacity (``--gpus``, daemon/sim/pools.py): each node's tier, the tiers'
    # prices and spot interruption process, how long a reclaimed spot node stays away after its
    # notice, and the seed of the interruption process (capacity.py)
    node_tier: Mapping[str, str] = field(default_factory=dict)
    tiers: Mapping[str, TierTerms] = field(default_factory=dict)
    spot_down_s: float = 600.0
    spot_seed: int = 0


__all__ = ["SimConfig"]
