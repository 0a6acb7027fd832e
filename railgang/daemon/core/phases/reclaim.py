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

from railgang.daemon.core.model import elastic
from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model import quota as q
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

    def _victims(self, job: Job) -> list[RunningJob]:
        d = self.d
        return sorted(
            (r for r in d.snap.running.values()
             if r.job_id in self.borrowed and r.job.account != job.account
             and r.priority_class != 0 and r.priority_class >= job.priority_class
             and r.preempt_deadline is None and r.job_id not in d.touched),
            key=lambda r: (r.start_time, r.job_id), reverse=True)  # the reverse of the order in
        # which borrowed_gpus fills the guarantee: the newest work is the borrowed work

    def run(self, order: list[Want], jobs: Mapping[str, Job]) -> tuple[Action, ...]:
        """Serve the waiting jobs of ``order`` that GPUs would help; returns what it emitted."""
        mark = self.d.mark()
        self._serve_all(order, jobs)
        return self.d.since(mark)

    def _serve_all(self, order: list[Want], jobs: Mapping[str, Job]) -> None:
        tree, d = self.tree, self.d
        if tree is None or (not self.borrowed and not self.inflight):
            return
        for x in order:
            job = jobs[x.job_id]
            r = d.reason(job.job_id)
            if r is None or r.code not in _MAY_RECLAIM or job.job_id in d.started:
                continue
            need = x.min_replicas * job.replica_gpus
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
        extra: dict[str, frozenset[int]] = dict(d.free)
        got = d.free_count
        shrinks: list[tuple[RunningJob, Assignment, Assignment]] = []
        kills: list[RunningJob] = []
        killed = 0
        cands = self._victims(job)[:_MAX_STEPS]
        steps = [(False, v) for v in cands if v.replicas > v.job.min_replicas] + \
                [(True, v) for v in cands]
        used: set[tuple[bool, str]] = set()
        placed: Placed | None = None
        tries = 0
        while placed is None:
            block = q.gate(tree, alloc, job.account, need)
            if block is None and got >= need and tries < 4:
                tries += 1
                res = d.place(gang_for(job, x.min_replicas, nodes_for(d, job, x)), extra)
                if isinstance(res, Placed):
                    placed = res
                    break
            step = next((s for s in steps if (s[0], s[1].job_id) not in used
                         and alloc.get(s[1].job.account, 0) > tree.guaranteed(s[1].job.account)
                         and (block is None or tree.under(s[1].job.account, block.account))
                         and self._allowed(s, job, killed)), None)
            if step is None:
                return  # no borrowed work left that could make room: the job keeps its reason
            kill, v = step
            used.add((kill, v.job_id))
            if kill:
                shrunk = next((s for s in shrinks if s[0].job_id == v.job_id), None)
                gone: Assignment = v.assignment
                if shrunk is not None:
                    shrinks.remove(shrunk)
                    gone = shrunk[1]  # the part the shrink would have kept goes too
                kills.append(v)
                killed += v.gpus
            else:
                kept, gone = elastic.shrink_assignment(v, v.job.min_replicas)
                shrinks.append((v, kept, gone))
            alloc[v.job.account] = alloc.get(v.job.account, 0) - gpu_count(gone)
            for n, gs in gone.items():
                extra[n] = extra.get(n, frozenset()) | frozenset(gs)
            got += gpu_count(gone)
        assert placed is not None
        self._emit(job, x, need, placed, shrinks, kills)

    def _allowed(self, step: tuple[bool, RunningJob], job: Job, killed: int) -> bool:
        kill, v = step
        if not kill:
            return True
        if pre.recently_preempted(v.job.last_preempted_at, self.d.now, self.budget.job_min_interval_s):
            return False
        return job.priority_class == 0 or self.churn + killed + v.gpus <= self.cap

    def _emit(self, job: Job, x: Want, need: int, placed: Placed,
              shrinks: list[tuple[RunningJob, Assignment, Assignment]],
              kills: list[RunningJob]) -> None:
        d = self.d
        self.served += 1
        for v, kept, gone in shrinks:
            d.shrink(v, v.job.min_replicas, kept, gone, release_quota=True)
        for v in kills:
            d.preempt(Preempt(v.job_id, pre.grace_for(v, self.budget), Reason.RECLAIMING,
                              job.job_id, v.gpus))
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


__all__ = ["ReclaimPhase"]
