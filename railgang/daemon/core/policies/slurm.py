"""Slurm-like baseline: multifactor priority (age + job size + fair-share) with EASY backfill.

This is what users have today (``PriorityType=priority/multifactor``, ``SchedulerType=sched/backfill``).

Priority = w_age · min(age / max_age, 1) + w_size · gpus / cluster_gpus + w_fs · 2^(−U/S), with U
the account's normalised decayed usage and S its normalised share (Slurm's classic fair-share
factor). Ordering key: 1. priority (higher first), 2. submit time, 3. job id.

Backfill (``mode="backfill"``): the first job that cannot start gets a reservation at its shadow
time (when running jobs' expected ends free enough GPUs); a later job may start only if it ends
before that time or fits in the GPUs the reservation leaves spare. Jobs are rigid (requested size,
all or nothing); no preemption inside a class.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from railgang.daemon.core.model.job import Job, JobRequest
from railgang.daemon.core.model.plan import Plan, regrow_targets, submit_order
from railgang.daemon.core.model.snapshot import Snapshot

_REQUEST = attrgetter("request")
_ACCOUNT = attrgetter("request.account")  # read for every waiting and running job: in C
_RUN_ACCOUNT, _ID = attrgetter("job.request.account"), attrgetter("job_id")


def fairshare_factors(snapshot: Snapshot) -> dict[str, float]:
    """Slurm's classic 2^(−U/S) per account (1.0 = no usage, 0.5 = used exactly its share)."""
    names = set(map(_ACCOUNT, snapshot.pending))
    names.update(map(_RUN_ACCOUNT, snapshot.running.values()), snapshot.accounts)
    accts = [snapshot.account(n) for n in sorted(names)]
    total_use = sum(a.usage_gpu_s for a in accts) or 1.0
    total_share = sum(a.share for a in accts) or 1.0
    out = {}
    for a in accts:
        s = a.share / total_share
        out[a.name] = 2.0 ** (-(a.usage_gpu_s / total_use) / s) if s > 0 else 0.0
    return out


@dataclass(frozen=True)
class Slurm:
    name = "slurm"
    weight_age: float = 1000.0  # PriorityWeightAge
    weight_size: float = 1000.0  # PriorityWeightJobSize (favours large jobs, as Slurm's default)
    weight_fairshare: float = 10000.0  # PriorityWeightFairshare
    max_age_s: float = 7 * 86400.0  # PriorityMaxAge

    def priority(self, job: Job, now: float, cluster_gpus: int, fs: float) -> float:
        age = min(max(0.0, now - job.submit_time) / self.max_age_s, 1.0)
        size = job.gpus / max(1, cluster_gpus)
        return self.weight_age * age + self.weight_size * size + self.weight_fairshare * fs

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        # the factors only order waiting jobs among themselves: one waiting job (a replay at
        # 80 % load, most cycles) needs no account's usage summed over every running job
        fs = fairshare_factors(snapshot) if len(snapshot.pending) > 1 else {}
        total = snapshot.total_gpus
        w_age, w_size, w_fs, max_age, g = (self.weight_age, self.weight_size, self.weight_fairshare,
                                           self.max_age_s, max(1, total))

        def key(r: JobRequest) -> tuple[float, float, str]:  # priority()'s arithmetic, inlined:
            # once per waiting job per cycle, so no forwarding property or method call per job
            age = min(max(0.0, now - r.submit_time) / max_age, 1.0)
            return -(w_age * age + w_size * (r.gpus / g) + w_fs * fs.get(r.account, 1.0)), r.submit_time, r.job_id

        queue = sorted(map(_REQUEST, snapshot.pending), key=key)
        # each job's Want(job, k, k) as FIFO's kept order holds it (the simulator builds one per
        # job, not one per waiting job per cycle), put in this order in C
        kept = submit_order(snapshot)
        wants = dict(zip(map(_ID, kept), kept, strict=True))
        return Plan(
            order=tuple(map(wants.__getitem__, map(_ID, queue))),
            mode="backfill",
            targets=regrow_targets(snapshot),
        )


POLICY = Slurm
