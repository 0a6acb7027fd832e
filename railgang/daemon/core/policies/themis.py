"""Themis: finish-time fairness ρ with a partial-allocation auction (DESIGN R-S3).

ρ = T_shared / T_independent. T_independent is the job's total running time on an independent
1/N share of the cluster (N = jobs contending: running + pending of the job's priority class or a
higher one — lower classes are preemptible by it); a share smaller than the job time-shares it
proportionally. T_shared is time since submit + the time left at the allocation it
would get now. Work left unknown → estimated as the work done so far (at least one hour): under
heavy-tailed durations the expected remaining time grows with age.

Allocation (the auction's equivalent, one round per cycle and priority class, higher classes
first): the ``1 − fairness`` fraction of a class's jobs with the highest ρ are offered the free
GPUs first. Each gets its minimum size in ρ order, then
spare replicas go, one at a time, to the highest bid = reduction of the bidder's ρ per GPU
(marginal value from its η(k)); the rest follow in ρ order. Ordering key: 1. auction round
(offered first), 2. ρ (higher first), 3. job id. ``mode="greedy"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from railgang.daemon.core.model import pools as hetero
from railgang.daemon.core.model.elastic import fill_by_marginal_gain
from railgang.daemon.core.model.job import Job, JobRequest
from railgang.daemon.core.model.plan import Plan, want
from railgang.daemon.core.model.snapshot import Snapshot

HOUR = 3600.0


def independent_rate(job: Job | JobRequest, share_gpus: float) -> float:
    """Progress rate (1.0 = requested size) on an exclusive ``share_gpus`` slice of the cluster."""
    share_k = share_gpus / job.replica_gpus
    if share_k >= job.min_replicas:
        return job.rate(max(1, min(job.max_replicas, math.floor(share_k))))
    return job.rate(job.min_replicas) * share_k / job.min_replicas  # time-shared


def contenders(snapshot: Snapshot) -> dict[int, int]:
    """N per priority class: running + waiting jobs of that class or a higher one (lower-class
    work is preemptible by it, so it does not dilute its fair share)."""
    per = [0, 0, 0, 0]
    for j in snapshot.pending:
        per[j.priority_class] += 1
    for c, n in enumerate(snapshot.running_per_class):
        per[c] += n
    return {c: max(1, sum(per[: c + 1])) for c in range(4)}


def rho(job: Job, now: float, replicas: int, n_jobs: int, cluster_gpus: int) -> float:
    """Finish-time fairness of ``job`` if it runs on ``replicas`` from now on. Its work done is
    its attained GPU-seconds over its requested GPUs (seconds at the requested size); its work
    left, when unknown, the work done, at least an hour (the module docstring)."""
    request, state = job.request, job.state
    rate = request.rate(replicas)
    if rate <= 0:
        return math.inf
    done = state.attained_gpu_s / request.gpus
    left = state.work_remaining_s
    if left is None:
        left = max(done, HOUR)
    t_shared = max(0.0, now - request.submit_time) + left / rate
    t_indep = (done + left) / independent_rate(request, cluster_gpus / max(1, n_jobs))
    return t_shared / t_indep


@dataclass(frozen=True)
class Themis:
    name = "themis"
    fairness: float = 0.8  # Themis f: the top (1 − f) of jobs by ρ bid in this round
    hetero: bool = True  # several GPU pools: place by per-type throughput (hetero.aware); False =
    # type-blind

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        total, free = snapshot.total_gpus, snapshot.free_gpus
        n = contenders(snapshot)
        order = []
        for c in sorted({j.priority_class for j in snapshot.pending}):  # higher classes bid first
            jobs = [j for j in snapshot.pending if j.priority_class == c]
            rhos = {j.job_id: rho(j, now, j.replicas, n[c], total) for j in jobs}
            ranked = sorted(jobs, key=lambda j: (-rhos[j.job_id], j.job_id))
            offered = ranked[: max(1, math.ceil((1.0 - self.fairness) * len(ranked)))]
            alloc = self.auction(offered, free, now, n[c], total)
            free -= sum(alloc[j.job_id] * j.replica_gpus for j in offered if j.job_id in alloc)
            order += [want(j.job_id, alloc[j.job_id], j.min_replicas) for j in offered if j.job_id in alloc]
            order += [want(j.job_id, j.replicas, j.min_replicas) for j in ranked if j.job_id not in alloc]
        plan = Plan(order=tuple(order), mode="greedy")  # running elastic jobs grow into spare GPUs
        return hetero.aware(plan, snapshot) if self.hetero else plan

    @staticmethod
    def auction(bidders: list[Job], free: int, now: float, n: int, total: int) -> dict[str, int]:
        """Minimum sizes in ρ order, then replicas to the highest marginal ρ reduction per GPU."""
        alloc: dict[str, int] = {}
        for j in bidders:
            if j.min_gpus <= free:
                alloc[j.job_id] = j.min_replicas
                free -= j.min_gpus
        jobs = {j.job_id: j for j in bidders}

        def rho_drop(j: Job, k: int) -> float:  # the bid: how much one more replica lowers ρ
            return rho(j, now, k, n, total) - rho(j, now, k + 1, n, total)

        fill_by_marginal_gain(list(alloc), alloc, jobs, free, rho_drop)
        return alloc


POLICY = Themis
