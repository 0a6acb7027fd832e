"""Pollux: goodput-maximising allocation for elastic jobs with a fairness knob (DESIGN R-S4).

goodput_i(k) = throughput_i(k) × efficiency_i(k):

- throughput: the job's ``speedup_fn`` — a compute + communication model such as
  ``allreduce(comm)`` (step = compute + comm · 2(k−1)/k) or measured points (``table``);
- statistical efficiency (gradient noise scale φ, McCandlish et al., as in Pollux):
  E(M) = (φ + M₀) / (φ + M) with M = k · batch_per_replica and M₀ the batch at the minimum size;
  φ unknown → E = 1;
- or the job's own ``goodput_fn`` (a measured model), which replaces both.

Allocation, once per cycle over the free GPUs (running jobs keep their size: shrinking them for
newcomers did not pay, issue 12 part 4; jobs running longer than ``lock_after_s`` are locked, as
production locks steady-state jobs: only regrown to their requested size), one priority class at a
time (higher first): 1. admit the class's waiting jobs in submit order at their asked size, 1b. with the GPUs no waiting job can use whole, start
elastic jobs small, in submit order, at the largest size that fits without wasting GPUs on a
super-linear curve and whose run at that size alone beats waiting for the asked size
(``elastic.pays_without_growth``; none while a job of the class runs short), 2. hand out the rest
by the best chunk gain per GPU (``elastic.fill_by_chunks``), value u_i = (goodput_i(k) /
goodput_i(asked))^p. ``p`` is the fairness knob: p = 1 maximises total relative goodput, p → 0
levels the relative speedups across jobs. Ordering key: 1. admitted first, 2. class, 3. submit
time, 4. job id. Admitted jobs start at their allocation, the rest all-or-nothing at their asked
size. Running elastic jobs get their allocation as ``targets`` (the cycle's anti-churn rules
decide whether a resize is worth it). ``mode="greedy"``.
"""

from __future__ import annotations

from dataclasses import dataclass

from railgang.daemon.core.model import pools as hetero
from railgang.daemon.core.model.elastic import (
    fill_by_chunks,
    pays_without_growth,
    running_ends,
    short_classes,
    start_size,
    wait_for,
)
from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.plan import Plan, regrow_targets, want
from railgang.daemon.core.model.shadow import Ends
from railgang.daemon.core.model.snapshot import Snapshot


def node_gpus(snapshot: Snapshot) -> int:
    """GPUs of the largest node (0 on an empty cluster): what "one node" means for a gang."""
    return max((n.gpus for n in snapshot.nodes.values()), default=0)


def statistical_efficiency(job: Job, replicas: int) -> float:
    """E(M) = (φ + M₀)/(φ + M): progress per sample at batch M relative to the base batch M₀."""
    if job.grad_noise_scale is None:
        return 1.0
    m0 = job.min_replicas * job.batch_per_replica
    m = replicas * job.batch_per_replica
    return (job.grad_noise_scale + m0) / (job.grad_noise_scale + m)


def goodput(job: Job, replicas: int) -> float:
    """Useful progress rate on ``replicas`` (throughput × statistical efficiency)."""
    if replicas <= 0:
        return 0.0
    if job.goodput_fn is not None:
        return job.goodput_fn(replicas)
    return job.speedup(replicas) * statistical_efficiency(job, replicas)


@dataclass(frozen=True)
class Pollux:
    name = "pollux"
    p: float = 0.5  # fairness knob: 1 = max total relative goodput, smaller = fairer
    lock_after_s: float = 6 * 3600.0  # running this long → size locked (steady state)
    hetero: bool = True  # several GPU pools: place by per-type throughput (hetero.aware); False =
    # type-blind
    whole_multinode: bool = False  # a job asking for more than one node starts at its asked size
    # (default sets it: measured, it paid there; for pollux's greedy queue it did not: 12 seeds of
    # the synthetic check, elastic/rigid mean JCT 0.92 without it, 0.94 with it)

    def utility(self, job: Job, k: int) -> float:
        base = goodput(job, job.min_replicas)
        return float((goodput(job, k) / base) ** self.p) if base > 0 else 0.0

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        movable = [r for r in snapshot.elastic_running
                   if r.job.elastic and r.priority_class >= 2 and r.preempt_deadline is None
                   and now - r.start_time < self.lock_after_s]
        # running jobs keep what they hold: shrinking them for every newcomer of their class cost
        # more in resizes and super-linear slowdowns than it won (issue 12 part 4, BENCHMARKS)
        capacity = snapshot.free_gpus
        alloc: dict[str, int] = {r.job_id: r.replicas for r in movable}
        jobs: dict[str, Job] = {r.job_id: r.job for r in movable}
        running = frozenset(alloc)
        short = short_classes(snapshot.elastic_running)  # these start work only at full size
        node = node_gpus(snapshot) if self.whole_multinode else 0
        queue = sorted(snapshot.pending, key=lambda j: (j.priority_class, j.submit_time, j.job_id))
        ends: Ends | None = None  # what runs, soonest end first (built on first use)
        for c in range(4):  # higher classes are admitted and grown before lower ones
            members = [r.job_id for r in movable if r.priority_class == c]
            for j in queue:  # 1. admission in submit order at the asked size
                if j.priority_class == c and j.replicas * j.replica_gpus <= capacity:
                    alloc[j.job_id], jobs[j.job_id] = j.replicas, j
                    capacity -= j.replicas * j.replica_gpus
                    members.append(j.job_id)
            for j in queue:  # 1b. GPUs nobody can use whole: small starts that pay alone
                if j.priority_class != c or j.job_id in alloc or not j.elastic or c in short:
                    continue
                k = start_size(j, capacity, node_gpus=node)
                if k is not None and ends is None:
                    ends = running_ends(snapshot.running.values(), now)
                if k is not None and ends is not None and pays_without_growth(
                        j, k, j.replicas, wait_for(ends, capacity, j.replicas * j.replica_gpus, now)):
                    alloc[j.job_id], jobs[j.job_id] = k, j
                    capacity -= k * j.replica_gpus
                    members.append(j.job_id)
            capacity = fill_by_chunks(members, alloc, jobs, capacity, self.value, running)  # 2.

        admitted = [j for j in queue if j.job_id in alloc]
        order = [want(j.job_id, alloc[j.job_id]) for j in admitted]
        order += [want(j.job_id, j.replicas) for j in queue if j.job_id not in alloc]
        targets = regrow_targets(snapshot)  # locked jobs keep their size or regrow to the request
        targets.update({i: alloc[i] for i in alloc if i in snapshot.running})
        plan = Plan(order=tuple(order), mode="greedy", targets=targets, sized=True)
        return hetero.aware(plan, snapshot) if self.hetero else plan

    def value(self, job: Job, k: int) -> float:
        """Goodput on ``k`` relative to the job's own at its asked size, to the power ``p``: a GPU
        is worth the share of the job's run it saves, whatever the job's size (fairness)."""
        base = goodput(job, job.replicas)
        return float((goodput(job, k) / base) ** self.p) if base > 0 and k > 0 else 0.0


POLICY = Pollux
