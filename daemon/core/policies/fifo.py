"""FIFO: first come, first served, rigid, head-of-line blocking (the simplest baseline).

Ordering key: 1. submit time, 2. job id. Every job is tried at its requested size, all or nothing
(no start-small); the first job that cannot start blocks all later jobs of its class and below
(``mode="strict"``). No preemption inside a class; an elastic job shrunk for a higher class grows
back to its requested size, never beyond (``regrow_targets``).
"""

from __future__ import annotations

from dataclasses import dataclass

from railgang.daemon.core.policy import Plan, regrow_targets, want
from railgang.daemon.core.snapshot import Snapshot


@dataclass(frozen=True)
class Fifo:
    name = "fifo"

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        queue = sorted(snapshot.pending, key=lambda j: (j.submit_time, j.job_id))
        return Plan(
            order=tuple(want(j.job_id, j.replicas) for j in queue),
            mode="strict",
            targets=regrow_targets(snapshot),
        )


POLICY = Fifo
