"""Reclaim (DESIGN R-Q2): a team's guaranteed job takes back what others borrowed.

Runs once per priority class, before the ordinary preempt phase, for jobs of that class that
still wait and that stay inside their account's own guarantee (``quota.gate`` marks them): a job
blocked by a department or organisation quota whose excess is other teams' borrowed work, or a
job waiting for GPUs that borrowed work holds.

Victims are running jobs with borrowed GPUs (``quota.borrowed_gpus``) of other accounts, of the
job's class or lower, never serving (class 0); borrowed work is reclaimable *within* the same
class — that is its lower preemption priority. Newest borrowed work goes first; elastic
victims are shrunk to their minimum before anything is preempted; an account stops being a
victim once it is back inside its guarantee. The preemption budgets hold as in
``railgang.daemon.core.model.preemption``: a job is preempted at most once per ``job_min_interval_s``,
kills count against the churn cap (serving exempt), an evicted job may not reclaim for
``cascade_window_s``, at most ``max_evictions_per_cycle`` jobs are served per cycle. GPUs of
jobs already signalled count as freed, so the next cycles wait for them instead of signalling
more.
"""

from __future__ import annotations

from collections.abc import Mapping

from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model import quota as q
from railgang.daemon.core.model import victims
from railgang.daemon.core.model.actions import Action, Preempt
from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import Assignment, Job, RunningJob, gpu_count
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.phases.draft import Draft
from railgang.daemon.core.phases.pool_place import nodes_for

_MAY_RECLAIM = (Reason.WAITING_FOR_GPUS, Reason.FRAGMENTED, Reason.QUARANTINED, Reason.RESERVED,
                *q.QUOTA_REASONS)
_MAX_STEPS = 64  # victims looked at per job (a reclaim that needs more waits a cycle)


class ReclaimPhase:
    """Free borrowed GPUs for guaranteed jobs (see the module docstring)."""

    def __init__(self, d: Draft, budget: pre.PreemptionBudget) -> None:
        snap = d.snap
        self.d, self.budget, self.tree = d, budget, snap.quotas
        self.borrowed = q.borrowed_gpus(self.tree, snap.running.values())
        self.inflight: dict[str, int] = {}  # GPUs of signalled jobs, per account
        for r in snap.running.values():
            if r.preempt_deadline is not None:
                self.inflight[r.job.account] = self.inflight.get(r.job.account, 0) + r.gpus
        self.churn = pre.churned_gpus(snap, d.now, budget.churn_window_s)
        self.cap = pre.churn_cap_gpus(snap, budget)
        self.served = 0
        # the reverse of the order in which borrowed_gpus fills the guarantee: the newest work is
        # the borrowed work
        self.newest = sorted(snap.running.values(), key=lambda r: (r.start_time, r.job_id), reverse=True)

    def _rules(self, job: Job, need: int, alloc: dict[str, int]) -> victims.Rules:
        """Reclaim's rules as the solver's input (module docstring): other accounts' borrowed
        work of the job's class or lower, never serving, newest first, elastic work shrunk first;
        the quota tree is the ledger (an account stops being a victim once back inside its
        guarantee; the job is placed once its quota admits it)."""
        d, budget, borrowed, tree = self.d, self.budget, self.borrowed, self.tree
        assert tree is not None
        return victims.Rules(
            d.now, looked_at=_MAX_STEPS, min_interval_s=budget.job_min_interval_s,
            may_take=lambda r: (r.job_id in borrowed and r.job.account != job.account
                                and r.priority_class != 0 and r.priority_class >= job.priority_class
                                and r.preempt_deadline is None and r.job_id not in d.touched),
            room=None if job.priority_class == 0 else self.cap - self.churn,
            shrink=lambda v: v.replicas > v.job.min_replicas, ledger=_Quotas(tree, job, need, alloc),
            grace=lambda v: pre.grace_for(v, budget))

    def run(self, order: list[Want], jobs: Mapping[str, Job]) -> tuple[Action, ...]:
        """Serve the waiting jobs of ``order`` that GPUs would help; returns what it emitted."""
        mark = self.d.mark()
        self._serve_all(order, jobs)
        return self.d.since(mark)

    def _serve_all(self, order: list[Want], jobs: Mapping[str, Job]) -> None:
        tree, d = self.tree, self.d
        # nothing borrowed and nothing in flight: no victim to take and no signalled GPUs to
        # wait for, so no job's reason can change here
        if tree is None or (not self.borrowed and not self.inflight):
            return
        for x in order:
            job = jobs[x.job_id]
            if d.waits_for(job.job_id) not in _MAY_RECLAIM or job.job_id in d.started:
                continue
            need = x.needed(job.replica_gpus)
            if d.account_gpus.get(job.account, 0) + need > tree.guaranteed(job.account):
                continue  # borrowed work does not reclaim
            flat = d.snap.account(job.account).quota_gpus
            if flat is not None and d.account_gpus.get(job.account, 0) + need > flat:
                continue  # Slurm's own account limit binds below the guarantee: nothing to reclaim
            if self.served >= self.budget.max_evictions_per_cycle:
                break
            self._serve(job, x, need)

    def _serve(self, job: Job, x: Want, need: int) -> None:
        tree, d, budget = self.tree, self.d, self.budget
        assert tree is not None
        alloc = {a: g - self.inflight.get(a, 0) for a, g in d.account_gpus.items()}
        flying = sum(self.inflight.values())
        if flying > 0 and q.gate(tree, alloc, job.account, need) is None \
                and need <= d.free_count + flying:
            self._use_inflight(need)
            d.wait(job, Reason.RECLAIMING, "waiting for reclaimed borrowed jobs to exit", need)
            return
        if pre.recently_preempted(job.last_preempted_at, d.now, budget.cascade_window_s):
            return  # its reason stays: an evicted job may not evict others yet

        def fits(kills: object, free: victims.Free, nodes: object) -> Placed | None:
            placed = d.place(gang_for(job, x.min_replicas, nodes_for(d, job, x)), free)
            return placed if isinstance(placed, Placed) else None

        found = victims.solve(victims.Need(need, d.free, fits, tried_free=False), self.newest,
                              self._rules(job, need, alloc))
        if found.placed is not None:  # else no borrowed work left could make room: it keeps its reason
            self._emit(job, x, need, found)

    def _emit(self, job: Job, x: Want, need: int, found: victims.Victims[Placed]) -> None:
        d, placed, shrinks, kills = self.d, found.placed, found.shrinks, found.kills
        assert placed is not None
        self.served += 1
        for v, kept, gone in shrinks:
            d.shrink(v, v.job.min_replicas, kept, gone, release_quota=True)
        for v, grace in zip(kills, found.graces, strict=True):
            d.preempt(Preempt(v.job_id, grace, Reason.RECLAIMING, job.job_id, v.gpus))
            self.churn += v.gpus
            self.inflight[v.job.account] = self.inflight.get(v.job.account, 0) + v.gpus
        if kills:
            self._use_inflight(sum(v.gpus for v in kills))
            d.wait(job, Reason.RECLAIMING,
                   f"reclaiming borrowed GPUs: signalled {', '.join(v.job_id for v in kills)}", need)
            return
        if placed.assignment and all(n in d.free and set(gs) <= d.free[n]
                                     for n, gs in placed.assignment.items()):
            d.start(job, placed, x.min_replicas)
        else:  # the quota is free now but the GPUs are not (yet): the next cycle places it
            d.wait(job, Reason.RECLAIMING, "borrowed jobs shrunk; starts next cycle", need)

    def _use_inflight(self, gpus: int) -> None:
        """Signalled GPUs this job counts on are not counted again for the next job."""
        for acc in sorted(self.inflight):
            take = min(gpus, self.inflight[acc])
            self.inflight[acc] -= take
            gpus -= take


class _Quotas:
    """The quota tree as the solver's ledger: GPUs each account holds as victims give theirs."""

    def __init__(self, tree: q.QuotaTree, job: Job, need: int, alloc: dict[str, int]) -> None:
        self.tree, self.job, self.need, self.alloc = tree, job, need, alloc

    def _block(self) -> q.QuotaBlock | None:
        return q.gate(self.tree, self.alloc, self.job.account, self.need)

    def allows(self, v: RunningJob) -> bool:
        """Its account still borrows, and under the quota that blocks the job (if one does)."""
        acc, block = v.job.account, self._block()
        return self.alloc.get(acc, 0) > self.tree.guaranteed(acc) and (
            block is None or self.tree.under(acc, block.account))

    def take(self, v: RunningJob, gone: Assignment) -> None:
        self.alloc[v.job.account] = self.alloc.get(v.job.account, 0) - gpu_count(gone)

    def ready(self) -> bool:
        return self._block() is None


__all__ = ["ReclaimPhase"]
