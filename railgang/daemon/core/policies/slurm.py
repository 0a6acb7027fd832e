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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import attrgetter

from railgang.daemon.core.model.job import Job, JobRequest
from railgang.daemon.core.model.plan import Plan, regrow_targets, submit_order
from railgang.daemon.core.model.queue_order import SUBMIT_ORDER
from railgang.daemon.core.model.snapshot import Snapshot

_REQUEST = attrgetter("request")
_ACCOUNT = attrgetter("request.account")  # the account of a waiting job (fair-share names)
_ID = attrgetter("job_id")


def fairshare_factors(snapshot: Snapshot) -> dict[str, float]:
    """Slurm's classic 2^(−U/S) per account (1.0 = no usage, 0.5 = used exactly its share)."""
    names = set(map(_ACCOUNT, snapshot.pending))
    names.update(snapshot.index.held, snapshot.accounts)  # (held: the running jobs' accounts)
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
        """The module docstring's priority of ``job`` (``fs``: its account's fair-share factor),
        read off :meth:`order_key` so the number reported is the one the plan sorts by."""
        return -self.order_key(now, {job.request.account: fs}, cluster_gpus)(job.request)

    def order_key(self, now: float, fs: Mapping[str, float], total: int) -> Callable[[JobRequest], float]:
        """The plan's ordering key (module docstring): minus the priority, so higher goes first;
        :meth:`plan` sorts the queue in submit order by it, and the sort keeps that order among
        equal priorities (submit time, then job id). ``fs``: fair-share factor per account (an
        account it lacks has used nothing: 1.0); ``total``: the cluster's GPUs. A closure over the
        weights, so :meth:`plan` sorts the whole queue by the one formula :meth:`priority` reports."""
        w_age, w_size, w_fs, max_age, g = (self.weight_age, self.weight_size, self.weight_fairshare,
                                           self.max_age_s, max(1, total))

        def key(r: JobRequest) -> float:
            age = min(max(0.0, now - r.submit_time) / max_age, 1.0)
            return -(w_age * age + w_size * (r.gpus / g) + w_fs * fs.get(r.account, 1.0))

        return key

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        # the factors only order waiting jobs among themselves: one waiting job needs no
        # account's usage summed over every running job
        fs = fairshare_factors(snapshot) if len(snapshot.pending) > 1 else {}
        key = self.order_key(now, fs, snapshot.total_gpus)
        # in submit order (submit time, then job id) first: a stable sort by priority alone is
        # then the module docstring's order
        queue = sorted(sorted(map(_REQUEST, snapshot.pending), key=SUBMIT_ORDER), key=key)
        # the plan reuses FIFO's Wants (same size, all or nothing) in priority order
        kept = submit_order(snapshot)
        wants = dict(zip(map(_ID, kept), kept, strict=True))
        return Plan(
            order=tuple(map(wants.__getitem__, map(_ID, queue))),
            mode="backfill",
            targets=regrow_targets(snapshot),
        )


POLICY = Slurm
