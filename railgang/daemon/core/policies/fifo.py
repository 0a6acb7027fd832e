"""FIFO: first come, first served, rigid, head-of-line blocking (the simplest baseline).

Ordering key: 1. submit time, 2. job id. Every job is tried at its requested size, all or nothing
(no start-small); the first job that cannot start blocks all later jobs of its class and below
(``mode="strict"``). No preemption inside a class; an elastic job shrunk for a higher class grows
back to its requested size, never beyond (``regrow_targets``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from railgang.daemon.core.model import pools as hetero
from railgang.daemon.core.model.plan import Plan, regrow_targets, submit_order
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.model.tiers import SpotRules


@dataclass(frozen=True)
class Fifo:
    name = "fifo"
    hetero: bool = True  # several GPU pools: each job to its relatively fastest (Gavel fifo_perf);
    # False = type-blind (Gavel fifo)
    spot: SpotRules = field(default_factory=SpotRules)

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        plan = Plan(  # Want(job, k, k) by (submit time, job id): kept by the simulator's backend
            order=submit_order(snapshot),
            mode="strict",
            targets=regrow_targets(snapshot),
        )
        return hetero.aware(plan, snapshot, self.spot) if self.hetero else plan


POLICY = Fifo
