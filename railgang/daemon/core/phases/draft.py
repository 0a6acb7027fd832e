"""Scratch state of one ``decide`` call: the working copy of free GPUs and what was decided.

Mutable on purpose and private to a single call (it never escapes ``decide``): the snapshot stays
immutable, and everything a phase learns (starts, shrinks, reasons, failed gang shapes) lives here.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping

from railgang.daemon.core.actions import Action, Start
from railgang.daemon.core.gang import GangRequest, Placed, Placer, Unplaceable
from railgang.daemon.core.hetero import Pools, pools_of
from railgang.daemon.core.job import Assignment, Job
from railgang.daemon.core.needs import Needs, eligible_nodes
from railgang.daemon.core.quota import pending_demand
from railgang.daemon.core.reasons import PendingReason, Reason
from railgang.daemon.core.snapshot import Snapshot

INF = float("inf")


class Work:
    """Mutable scratch state private to one ``decide`` call (never escapes it)."""

    def __init__(self, snap: Snapshot, now: float, placer: Placer, seed: int) -> None:
        self.snap, self.now, self.placer, self.seed = snap, now, placer, seed
        self.free: dict[str, frozenset[int]] = {n: g for n, g in snap.free.items() if g}
        self.free_count = sum(len(g) for g in self.free.values())
        self.total = snap.total_gpus
        self.failed: dict[GangRequest, Unplaceable] = {}  # gang shapes that failed this cycle
        self.account_gpus = snap.account_running_gpus()
        # GPUs waiting jobs claim inside their own guarantee (borrowing may not take them)
        self.waiting = pending_demand(snap.quotas, snap.pending) if snap.quotas is not None else {}
        self.started: set[str] = set()
        self.touched: set[str] = set()  # running jobs shrunk, grown or preempted this cycle
        self.reasons: dict[str, PendingReason] = {}
        self.starts: list[Action] = []
        self.shrinks: list[Action] = []
        self.preempts: list[Action] = []
        self.grows: list[Action] = []
        self.blocked_classes: set[int] = set()  # classes with a job waiting for GPUs
        self.reserved = False
        self._started_ends: list[tuple[float, int]] = []  # (expected end, GPUs) of this cycle's starts
        self._ends: list[tuple[float, int]] | None = None  # all expected ends, sorted, built lazily
        self._eligible: dict[Needs, frozenset[str]] = {}  # nodes meeting each needs, per cycle
        self._pools: Pools | None = None  # GPU pools (type, tier) of the snapshot, built lazily

    @property
    def ends(self) -> list[tuple[float, int]]:
        """(expected end, GPUs) of running jobs and of jobs started this cycle, soonest first."""
        if self._ends is None:
            running = [(r.expected_end(self.now), r.gpus) for r in self.snap.running.values()]
            self._ends = sorted(running + self._started_ends)
        return self._ends

    @property
    def pools(self) -> Pools:
        """The snapshot's GPU pools (``hetero.pools_of``; one pool on a cluster without types)."""
        if self._pools is None:
            self._pools = pools_of(self.snap)
        return self._pools

    # -- placement ---------------------------------------------------------------------------
    def eligible(self, job: Job) -> frozenset[str] | None:
        """Usable nodes meeting ``job``'s needs (None: a job without needs may use any node)."""
        needs = job.needs
        if needs.empty:
            return None
        nodes = self._eligible.get(needs)
        if nodes is None:
            facts = {n: node.facts for n, node in self.snap.nodes.items() if node.state.usable}
            nodes = self._eligible[needs] = eligible_nodes(needs, facts)
        return nodes

    def place(self, gang: GangRequest,
              free: Mapping[str, frozenset[int]] | None = None) -> Placed | Unplaceable:
        """Place ``gang`` on this cycle's free GPUs (or on ``free``, a what-if); a shape that
        failed on the free GPUs fails again until some are given back, for the same reason."""
        if free is None:
            failed = self.failed.get(gang)
            if failed is not None:
                return failed
            res = self.placer(self.snap.fabric, self.free, gang, health=self.snap.health, seed=self.seed)
            if isinstance(res, Unplaceable):
                self.failed[gang] = res
            return res
        return self.placer(self.snap.fabric, free, gang, health=self.snap.health, seed=self.seed)

    def take(self, assignment: Assignment) -> None:
        for n, gs in assignment.items():
            left = self.free.get(n, frozenset()) - frozenset(gs)
            if left:
                self.free[n] = left
            else:
                self.free.pop(n, None)
            self.free_count -= len(gs)

    def give(self, assignment: Assignment) -> None:
        for n, gs in assignment.items():
            self.free[n] = self.free.get(n, frozenset()) | frozenset(gs)
            self.free_count += len(gs)
        self.failed.clear()  # more free GPUs: earlier failures may now succeed

    def start(self, job: Job, placed: Placed, replicas: int) -> Start:
        """Start ``job`` on ``placed``; returns the action emitted."""
        self.take(placed.assignment)
        start = Start(job.job_id, placed.assignment, replicas, placed.cost)
        self.starts.append(start)
        self.started.add(job.job_id)
        self.account_gpus[job.account] = self.account_gpus.get(job.account, 0) + replicas * job.replica_gpus
        left = job.remaining_at(replicas)
        end = (self.now + left if left is not None else INF, replicas * job.replica_gpus)
        self._started_ends.append(end)
        if self._ends is not None:
            bisect.insort(self._ends, end)
        return start

    def wait(self, job: Job, code: Reason, detail: str, needed: int) -> None:
        self.reasons[job.job_id] = PendingReason(job.job_id, code, detail, needed, self.free_count)

    def shadow(self, need: int) -> tuple[float, int]:
        """EASY shadow time: when ``need`` GPUs are free by running jobs' expected ends, and the
        GPUs spare at that time (count-based; topology is checked when the job actually starts)."""
        avail, t = self.free_count, self.now
        for end, g in self.ends:
            if avail >= need:
                break
            avail, t = avail + g, end
        return (t, avail - need) if avail >= need else (INF, 0)


__all__ = ["INF", "Work"]
