"""Fluent builders and a first-fit fake placer for the decision-core tests.

``job("a").gpus(8).tp(8).cls(1).build()``; ``cluster(4).pending(job("a").gpus(8)).build()``.
The fake placer is *not* a placement engine: it exists so the cycle can be tested without
``topology``; contract tests also run against the real ``railgang.topology.placement.place``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from railgang.daemon.core import (
    Account,
    GangRequest,
    Job,
    JobRequest,
    JobState,
    Node,
    Placed,
    PlacementFailure,
    RunningJob,
    SpeedupFn,
    Unplaceable,
    make_snapshot,
)
from railgang.daemon.core.model.snapshot import PreemptEvent, Snapshot

STATE_FIELDS = frozenset(f.name for f in dataclasses.fields(JobState))


class JobB:
    def __init__(self, job_id: str) -> None:
        self._f: dict[str, Any] = {"job_id": job_id, "gpus": 1}

    def _set(self, **kw: Any) -> JobB:
        new = JobB(self._f["job_id"])
        new._f = {**self._f, **kw}
        return new

    def gpus(self, n: int) -> JobB:
        return self._set(gpus=n)

    def tp(self, n: int) -> JobB:
        return self._set(tp=n)

    def pp(self, n: int) -> JobB:
        return self._set(pp=n)

    def cls(self, c: int) -> JobB:
        return self._set(priority_class=c)

    def account(self, a: str) -> JobB:
        return self._set(account=a)

    def at(self, t: float) -> JobB:
        return self._set(submit_time=t)

    def elastic(self, lo: int, hi: int) -> JobB:
        return self._set(elastic_min=lo, elastic_max=hi)

    def work(self, s: float) -> JobB:
        return self._set(work_remaining_s=s)

    def limit(self, s: float) -> JobB:
        return self._set(time_limit_s=s)

    def service(self, gpu_s: float) -> JobB:
        return self._set(attained_gpu_s=gpu_s)

    def speedup(self, fn: SpeedupFn) -> JobB:
        return self._set(speedup_fn=fn)

    def evicted(self, t: float) -> JobB:
        return self._set(last_preempted_at=t)

    def with_(self, **kw: Any) -> JobB:
        return self._set(**kw)

    def build(self) -> Job:
        state = {k: v for k, v in self._f.items() if k in STATE_FIELDS}
        request = {k: v for k, v in self._f.items() if k not in STATE_FIELDS}
        return Job(JobRequest(**request), JobState(**state))


def job(job_id: str) -> JobB:
    return JobB(job_id)


def as_job(j: JobB | Job) -> Job:
    return j.build() if isinstance(j, JobB) else j


def first_fit(fabric: Any, free: Mapping[str, frozenset[int]], spec: GangRequest, *,
              health: Any = None, seed: int = 0) -> Placed | Unplaceable:
    """Fake placer: whole TP groups per node, nodes in name order, all or nothing."""
    if spec.gpus > sum(len(g) for g in free.values()):
        return Unplaceable(PlacementFailure.INSUFFICIENT_GPUS, "not enough free GPUs")
    got: dict[str, tuple[int, ...]] = {}
    left = spec.gpus
    for node in sorted(free):
        gs = sorted(free[node])
        take = min(left, len(gs) // spec.tp * spec.tp)
        if take:
            got[node] = tuple(gs[:take])
            left -= take
        if not left:
            return Placed(got, float(len(got)))
    return Unplaceable(PlacementFailure.TOPOLOGY_FRAGMENTED, "no node set holds whole TP groups")


class ClusterB:
    def __init__(self, nodes: int, gpus_per_node: int = 8) -> None:
        self.nodes = [Node(f"n{i:03d}", gpus_per_node) for i in range(nodes)]
        self.gpn = gpus_per_node
        self._running: list[RunningJob] = []
        self._pending: list[Job] = []
        self._accounts: list[Account] = []
        self._events: list[PreemptEvent] = []
        self.now = 0.0

    def running(self, *js: JobB | Job, on: Mapping[str, tuple[int, ...]] | None = None,
                start: float = 0.0, replicas: int | None = None, **kw: Any) -> ClusterB:
        for j in js:
            self._run_one(as_job(j), on, start, replicas, **kw)
        return self

    def _run_one(self, jj: Job, on: Mapping[str, tuple[int, ...]] | None, start: float,
                 replicas: int | None, **kw: Any) -> None:
        if on is None:  # first fit over GPUs not yet used
            used = {(n, g) for r in self._running for n, gs in r.assignment.items() for g in gs}
            need = (replicas or jj.replicas) * jj.replica_gpus
            on_d: dict[str, list[int]] = {}
            for n in self.nodes:
                for g in range(n.gpus):
                    if need and (n.name, g) not in used:
                        on_d.setdefault(n.name, []).append(g)
                        need -= 1
            on = {n: tuple(g) for n, g in on_d.items()}
        self._running.append(RunningJob(jj, on, start, replicas or jj.replicas, **kw))

    def pending(self, *jobs: JobB | Job) -> ClusterB:
        self._pending.extend(as_job(j) for j in jobs)
        return self

    def accounts(self, *a: Account) -> ClusterB:
        self._accounts.extend(a)
        return self

    def preempted(self, *e: PreemptEvent) -> ClusterB:
        self._events.extend(e)
        return self

    def at(self, now: float) -> ClusterB:
        self.now = now
        return self

    def build(self, fabric: Any = None) -> Snapshot:
        return make_snapshot(now=self.now, fabric=fabric, nodes=self.nodes, running=self._running,
                             pending=self._pending, accounts=self._accounts,
                             preemptions=self._events)


def cluster(nodes: int, gpus_per_node: int = 8) -> ClusterB:
    return ClusterB(nodes, gpus_per_node)


def replace(j: Job, **kw: Any) -> Job:
    """``j`` with request or state fields changed (each part replaced as a whole value)."""
    state = {k: v for k, v in kw.items() if k in STATE_FIELDS}
    request = {k: v for k, v in kw.items() if k not in STATE_FIELDS}
    return Job(dataclasses.replace(j.request, **request) if request else j.request,
               dataclasses.replace(j.state, **state) if state else j.state)
