"""FIFO: first come, first served, rigid, head-of-line blocking (the simplest baseline).

Ordering key: 1. submit time, 2. job id. Every job is tried at its requested size, all or nothing
(no start-small); the first job that cannot start blocks all later jobs of its class and below
(``mode="strict"``). No preemption inside a class; an elastic job shrunk for a higher class grows
back to its requested size, never beyond (``regrow_targets``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter

from railgang.daemon.core.model import pools as hetero
from railgang.daemon.core.model.plan import Plan, Want, regrow_targets
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.model.tiers import SpotRules

_SUBMIT_ORDER = attrgetter("request.submit_time", "request.job_id")  # the ordering key, in C
_REQUEST = attrgetter("request")


@dataclass(frozen=True)
class Fifo:
    name = "fifo"
    hetero: bool = True  # several GPU pools: each job to its relatively fastest (Gavel fifo_perf);
    # False = type-blind (Gavel fifo)
    spot: SpotRules = field(default_factory=SpotRules)

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        queue = sorted(snapshot.pending, key=_SUBMIT_ORDER)
        plan = Plan(  # Want(job, k, k): want(job, k), without a call per waiting job per cycle
            order=tuple([Want(r.job_id, r.replicas, r.replicas) for r in map(_REQUEST, queue)]),
            mode="strict",
            targets=regrow_targets(snapshot),
        )
        return hetero.aware(plan, snapshot, self.spot) if self.hetero else plan


POLICY = Fifo
