"""FIFO, greedy in arrival order: skip a job that does not fit, start later ones that do.

Ordering key: 1. submit time, 2. job id — the same as ``fifo``. The one difference is the queue
discipline (``mode="greedy"``): a job that cannot start now is passed over and every later job of
its class that fits starts, so a big gang waiting for GPUs never holds idle GPUs back from small
jobs behind it (``fifo`` is strict head-of-line: the first job that cannot start blocks the rest).
There is no reservation, so under steady small-job load a big gang may wait indefinitely — the
price of work conservation without backfill. Rigid, no preemption inside a class, heterogeneity
as ``fifo``. Gavel's simulator's ``fifo`` is *not* this one: its allocation stops at the first
job that fits no worker type, i.e. strict like ``fifo`` (docs/simulator.md, "Fidelity").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from railgang.daemon.core.model.plan import Plan
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies.fifo import Fifo


@dataclass(frozen=True)
class FifoGreedy(Fifo):
    name = "fifo-greedy"

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        # same order, targets and pools as strict FIFO; only the discipline differs
        return dataclasses.replace(super().plan(snapshot, now), mode="greedy")


POLICY = FifoGreedy
