"""The size phases: shrink running elastic jobs to the plan's targets before placement (the GPUs
they free serve this cycle's starts), grow them after it into what is left when the marginal gain
pays. Both write only through the cycle's :class:`~railgang.daemon.core.phases.draft.Draft`.
"""

from __future__ import annotations

from railgang.daemon.core.model import elastic
from railgang.daemon.core.model import quota as quotas
from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import RunningJob
from railgang.daemon.core.model.plan import Plan
from railgang.daemon.core.phases.draft import Draft
from railgang.daemon.core.phases.pool_place import grow_nodes


def _targets(d: Draft, plan: Plan) -> list[tuple[RunningJob, int]]:
    out = []
    for run in d.snap.elastic_running:
        job = run.job
        if run.job_id in d.touched or run.preempt_deadline is not None:
            continue
        target = plan.targets.get(run.job_id, elastic.default_target(run))
        out.append((run, max(job.min_replicas, min(job.max_replicas, target))))
    return out


def shrink_phase(d: Draft, plan: Plan, rules: elastic.ElasticRules) -> tuple[Action, ...]:
    """Apply the plan's shrink targets first: the GPUs they free serve this cycle's starts."""
    mark = d.mark()
    for run, target in _targets(d, plan):
        if target < run.replicas and elastic.resize_pays(run, target, d.now, rules):
            kept, gone = elastic.shrink_assignment(run, target)
            d.shrink(run, target, kept, gone)
    return d.since(mark)


def grow_phase(d: Draft, plan: Plan, rules: elastic.ElasticRules) -> tuple[Action, ...]:
    """Grow elastic jobs into what is left, by whole replicas, if the marginal gain pays."""
    mark = d.mark()
    for run, target in _targets(d, plan):
        job = run.job
        if target <= run.replicas or run.job_id in d.touched:
            continue
        higher_waits = any(c < job.priority_class for c in d.blocked_classes)
        same_waits = job.priority_class in d.blocked_classes
        if (higher_waits or same_waits) and d.reserved:
            continue  # growing could delay the reserved job
        if higher_waits and not plan.sized:
            continue  # leftover GPUs belong to waiting work of a higher class
        if same_waits and not plan.sized:
            # a job started small (or shrunk) regrows to its requested size first — that is the
            # promise start-small was made on; growing beyond it waits until nobody of its class does
            target = min(target, max(run.replicas, job.replicas))
            if target <= run.replicas:
                continue
        _grow_to(d, run, target, rules)
    return d.since(mark)


def _grow_to(d: Draft, run: RunningJob, target: int, rules: elastic.ElasticRules) -> None:
    job = run.job
    if target <= run.replicas:
        return
    quota = d.snap.account(job.account).quota_gpus
    room = d.free_count if quota is None else min(d.free_count, quota - d.account_gpus.get(job.account, 0))
    room = int(min(room, quotas.room(d.snap.quotas, d.account_gpus, job.account, waiting=d.waiting)))
    top = min(target, run.replicas + max(0, room) // job.replica_gpus)
    k = max((x for x in elastic.sizes(job) if run.replicas < x <= top), default=run.replicas)
    while k > run.replicas and elastic.resize_pays(run, k, d.now, rules):
        res = d.place(gang_for(job, k - run.replicas, grow_nodes(d, run)))
        if isinstance(res, Placed):
            d.grow(run, k, res)
            break
        k = max((x for x in elastic.sizes(job) if run.replicas < x < k), default=run.replicas)


__all__ = ["grow_phase", "shrink_phase"]
