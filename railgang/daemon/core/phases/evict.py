"""The preempt phase: free GPUs for waiting jobs by shrinking, then evicting, lower work.

Rules and budgets live in :mod:`railgang.daemon.core.model.preemption`; this module applies them in order.
"""

from __future__ import annotations

from collections.abc import Mapping

from railgang.daemon.core.model import elastic, victims
from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model import quota as quotas
from railgang.daemon.core.model.actions import Action, Preempt
from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.plan import Plan, Want, want
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.phases.draft import INF, Draft
from railgang.daemon.core.phases.evict_domain import domain_gang, domain_rules
from railgang.daemon.core.phases.pool_place import nodes_for

# reasons of jobs that more free GPUs would let start (a quota or a request no node meets would not)
_GPUS_WOULD_HELP = (Reason.WAITING_FOR_GPUS, Reason.FRAGMENTED, Reason.QUARANTINED, Reason.RESERVED,
                    Reason.NO_ELIGIBLE_CAPACITY)


class EvictPhase:
    """Free GPUs for waiting jobs, in order: shrink elastic lower work, then evict whole jobs.

    Called once per priority class (higher first), right after that class was placed, so lower
    classes never take the GPUs a higher class could have had by shrinking or evicting. Victims are
    ranked once, when a search first walks (``preemption.victim_key``); a job with no eviction set
    leaves a memo (``model/signature.py``, "the preempt phase's eviction memo") so identical jobs
    behind it are answered without a search.
    """

    def __init__(self, d: Draft, plan: Plan, budget: pre.PreemptionBudget,
                 rules: elastic.ElasticRules = elastic.ElasticRules(), *, whole_domain: bool = False) -> None:
        self.d, self.plan, self.budget, self.rules = d, plan, budget, rules
        # multi-node gangs evict whole leaves (phases/evict_domain.py; CycleConfig.whole_domain_evict)
        self.whole_domain = whole_domain
        self.would_help = (*_GPUS_WOULD_HELP, Reason.WAITING_FOR_LEAF) if whole_domain else _GPUS_WOULD_HELP
        self.takeable: list[RunningJob] | None = None  # who may be evicted at all (_prepare)
        self.by_class: dict[int, list[RunningJob]] = {}  # the takeable by priority class (_prepare)
        self.keys: dict[str, tuple[float, float, float, float, str]] = {}  # victim keys, once asked
        self.ranked: dict[tuple[int, float], list[RunningJob]] = {}  # each by_key list in rank order
        self.by_key: dict[tuple[int, float], list[RunningJob]] = {}  # _takers, by (class, level)
        self.hopeless: dict[tuple[object, ...], Reason | None] = {}
        self.served = 0
        self.places: dict[tuple[str, int], victims.Place] = {}  # (node, free GPUs) -> its Place
        self.prepared = False  # the O(running) state below is built for the first job an
        # eviction could serve; a cycle with none never needs it

    def _prepare(self) -> None:
        snap, plan, budget, d = self.d.snap, self.plan, self.budget, self.d
        self.prepared = True
        # with churn_burst_gpus, one whole leaf larger than the cap may go at once (same
        # long-run rate, a longer window: preemption.churn_allowance)
        self.churn, self.cap = pre.churn_allowance(snap, budget, d.now)
        # GPUs of jobs already signalled (they come back to the waiting jobs first); and what
        # decides, before any ranking, whether anybody may be evicted (the class and level
        # rules, _may_find_victims_ignoring_budget): the worst level per class among possible
        # victims (whether the budget allows it: _may_find_victims)
        running = snap.running.values()
        self.inflight = sum(r.gpus for r in running if r.preempt_deadline is not None)
        self.takeable = takeable = [r for r in running if r.preempt_deadline is None and r.priority_class != 0]
        self.worst: dict[int, float] = {}
        self.lower_runs: dict[int, bool] = {}  # per class: runs a class it may evict
        self.shrinkable: bool | None = None  # could any of them shrink (read once the churn is spent)
        worst, levels, by_class = self.worst, plan.levels, self.by_class
        for r in takeable:
            c, lvl = r.priority_class, levels.get(r.job_id, 0.0)
            if lvl > worst.get(c, -INF):
                worst[c] = lvl
            got = by_class.get(c)
            if got is None:
                by_class[c] = [r]
            else:
                got.append(r)

    def _may_find_victims_ignoring_budget(self, job: Job, level: float) -> bool:
        """Is anybody running whom this job's class (or level) may evict?"""
        c = job.priority_class
        lower = self.lower_runs.get(c)
        if lower is None:  # (one answer per class: ``worst`` is fixed once prepared)
            lower = self.lower_runs[c] = any(pre.class_may_preempt(c, v) for v in self.worst)
        if lower:
            return True
        return self.plan.preempt_within_class and c >= 2 and self.worst.get(c, -1.0) > level

    def _may_find_victims(self, job: Job, level: float) -> bool:
        """Whether the churn budget leaves an eviction possible: a job of class 0 is exempt from
        the cap, and a shrink is free of churn. False is answered with ``preemption_budget`` for
        every job it holds, before its candidates are looked at (the rule, ``model/preemption.py``)."""
        if not self._may_find_victims_ignoring_budget(job, level):
            return False
        if job.priority_class == 0 or self.churn < self.cap:
            return True
        if self.shrinkable is None:
            assert self.takeable is not None  # (built by _prepare)
            self.shrinkable = any(r.replicas > r.job.min_replicas for r in self.takeable)
        return self.shrinkable

    def _takers(self, job: Job, level: float) -> list[RunningJob]:
        """The running jobs ``job`` may evict at ``level``: those of a class its class may preempt
        (DESIGN R-S7), and under the policy's levels those of its own class (2 or 3) in a higher
        level. One list per (class, level), which every waiting job of that class and level
        reads, in no particular order: the solver puts them in rank order (``_in_rank``) before
        its search reads the order."""
        key = (job.priority_class, level)
        got = self.by_key.get(key)
        if got is None:
            c, got = job.priority_class, []
            for vc, runs in self.by_class.items():
                if pre.class_may_preempt(c, vc):
                    got.extend(runs)
                elif vc == c >= 2 and self.plan.preempt_within_class:
                    levels = self.plan.levels
                    got.extend(v for v in runs if levels.get(v.job_id, level) > level)
            self.by_key[key] = got
        return got

    def _in_rank(self, key: tuple[int, float], cands: list[RunningJob]) -> list[RunningJob]:
        """``cands`` (some of the ``key``'s takers) in rank order (``preemption.victim_key``,
        whose last field, the job id, makes it total): each (class, level)'s takers sorted once,
        a running job's key computed once a cycle."""
        ranked = self.ranked.get(key)
        if ranked is None:
            keys, levels, now = self.keys, self.plan.levels, self.d.now

            def rank(v: RunningJob) -> tuple[float, float, float, float, str]:
                k = keys.get(v.job_id)
                if k is None:
                    k = keys[v.job_id] = pre.victim_key(v, levels.get(v.job_id, 0.0), now)
                return k

            ranked = self.ranked[key] = sorted(self.by_key[key], key=rank)
        if len(cands) == len(ranked):
            return ranked  # all of them
        ids = {v.job_id for v in cands}
        return [v for v in ranked if v.job_id in ids]

    def _rules(self, job: Job, level: float) -> victims.Rules:
        """The rules of an eviction for ``job`` (module ``preemption``), as the solver's input;
        who may be taken is the (class, level)'s takers, the candidates given (``_takers``)."""
        now, budget, rules = self.d.now, self.budget, self.rules
        key = (job.priority_class, level)
        return victims.Rules(
            now, order=lambda cands: self._in_rank(key, cands),
            min_interval_s=budget.job_min_interval_s,
            room=self.cap - self.churn if job.priority_class > 0 else None,
            grace=lambda v: pre.grace_for(v, budget), shrink_notice_s=self.d.shrink_grace_s,
            # a shrink serves a higher class only: shrinking a peer to its minimum left a deficit
            # that same-class work never gave back (issue 12 part 4); peers are evicted under the budgets
            shrink=lambda v: (v.priority_class > job.priority_class
                              and elastic.shrink_pays(v, v.job.min_replicas, now, rules)))

    def _solve(self, job: Job, x: Want, cands: list[RunningJob],
               allowed: frozenset[str] | None) -> victims.Victims[Placed]:
        d = self.d
        need = x.needed(job.replica_gpus)

        def fits(kills: object, free: victims.Free, nodes: frozenset[str] | None) -> Placed | None:
            placed = d.place(gang_for(job, x.min_replicas, allowed if nodes is None else nodes), free)
            return placed if isinstance(placed, Placed) else None

        rules = self._rules(job, x.level)
        if self.whole_domain and domain_gang(d.snap.fabric, need):
            places, rules = domain_rules(d, allowed, rules, self.budget)
            return victims.solve(victims.Need(need, d.free, fits, places, one_place=True,
                                              waited_s=max(0.0, d.now - job.submit_time)), cands, rules)
        return victims.solve(victims.Need(need, d.free, fits, draw_places=lambda: self._nodes(cands)), cands, rules)

    def _nodes(self, cands: list[RunningJob]) -> tuple[victims.Place, ...]:
        """The nodes the candidates hold GPUs on, by name: whole-job evictions are taken node by node
        (``preemption`` module docstring): victims taken one by one in rank order alone scatter over
        the nodes: on a full cluster of 1-GPU jobs an 8-GPU gang then killed up to the churn cap
        without ever emptying a node (Philly, issue 12 part 5). A node's Place is built once per
        (node, free GPUs) a cycle."""
        d, made = self.d, self.places
        nodes, free = d.snap.nodes, d.free
        out = []
        for n in sorted({n for v in cands for n, gs in v.assignment.items() if gs}):
            key = (n, len(free.get(n, ())))
            p = made.get(key)
            if p is None:
                p = made[key] = victims.Place(n, frozenset((n,)), nodes[n].gpus, key[1])
            out.append(p)
        return tuple(out)

    def run(self, order: list[Want], jobs: Mapping[str, Job]) -> tuple[Action, ...]:
        """Serve the waiting jobs of ``order`` (one priority class) that GPUs would help; returns
        what it emitted."""
        mark = self.d.mark()
        if order and not self._moot(jobs[order[0].job_id].priority_class):
            self._serve_all(order, jobs)
        return self.d.since(mark)

    def _moot(self, priority_class: int) -> bool:
        """Whether serving this class can change nothing: batch jobs evict nobody unless the
        policy ranks inside the class, and only a quota can revise a reason here."""
        if priority_class != 3 or self.plan.preempt_within_class or self.d.snap.quotas is not None:
            return False
        return not self.d.snap.account_quotas

    def _serve_all(self, order: list[Want], jobs: Mapping[str, Job]) -> None:
        d, plan, budget, now = self.d, self.plan, self.budget, self.d.now
        hopeless, would_help = self.hopeless, self.would_help
        for x in order:
            job = jobs[x.job_id]
            if d.waits_for(job.job_id) not in would_help:
                continue
            if self.served >= budget.max_evictions_per_cycle:
                break
            need = x.needed(job.replica_gpus)
            if self._over_quota(job, need):
                continue
            if job.priority_class == 3 and not plan.preempt_within_class:
                continue  # batch evicts nobody unless the policy ranks inside the class
            if not self.prepared:  # built for the first job an eviction could serve
                self._prepare()
            if x.min_replicas < x.replicas and not any(c > job.priority_class for c in self.worst):
                # only peers run: killing one buys the asked size, never a small start (the
                # victim's requeue cost more than the small start gave; issue 12 part 4)
                x = want(x.job_id, x.replicas, x.replicas, x.level, x.pools)
                need = x.needed(job.replica_gpus)
            if not self._may_find_victims_ignoring_budget(job, x.level):
                continue  # nobody this job may evict is running
            if self.inflight > 0 and d.free_count < need <= d.free_count + self.inflight:
                self.inflight -= need - d.free_count  # GPUs already signalled are this job's
                d.wait(job, Reason.PREEMPTING, "waiting for signalled jobs to exit", need)
                continue
            if pre.recently_preempted(job.last_preempted_at, now, budget.cascade_window_s):
                d.wait(job, Reason.CASCADE_DAMPED, "evicted recently; may not evict others yet", need)
                continue
            if not self._may_find_victims(job, x.level):
                d.wait(job, Reason.PREEMPTION_BUDGET, "eviction would exceed a preemption budget", need)
                continue
            ck = (job.priority_class, x.level)
            takers = self._takers(job, x.level)
            allowed = nodes_for(d, job, x)
            # the candidates below follow from the memo's key until something is carried out
            # (which clears the memo), so a job like one already searched is answered first;
            # a gang still waiting out its patience for a whole leaf is not like one past it
            patient = self.whole_domain and now - job.submit_time < budget.domain_patience_s
            memo = (gang_for(job, x.min_replicas, allowed), ck, job.priority_class == 0, patient)
            if memo in hopeless:
                code = hopeless[memo]
                if code is not None:
                    d.wait(job, code, "eviction would exceed a preemption budget", need)
                continue
            # only victims on nodes the job may use (its needs, its pool) can make room for it:
            # the others would spend the churn budget of the search for nothing
            cands = [v for v in takers if v.job_id not in d.touched
                     and (allowed is None or not allowed.isdisjoint(v.assignment))]
            if not cands:
                hopeless[memo] = None
                continue
            # victims that together cannot reach the need leave the job's reason as it is: no
            # budget stands in the way (a search would blame a recently evicted one)
            if d.free_count + sum(v.gpus for v in cands) < need:
                hopeless[memo] = None
                continue
            found = self._solve(job, x, cands, allowed)
            if found.why == "patient":  # it waits on for a leaf to free by itself
                d.annotate(job.job_id, f"evicts for a whole leaf after {budget.domain_patience_s / 60:.0f} min "
                           f"of waiting ({max(0.0, now - job.submit_time) / 60:.0f} so far)")
                continue
            if found.placed is None:
                hopeless[memo] = Reason.PREEMPTION_BUDGET if found.why == "budget" else None
                if found.why == "budget":
                    d.wait(job, Reason.PREEMPTION_BUDGET, "eviction would exceed a preemption budget", need)
                continue
            self._carry_out(job, x, need, found)
            hopeless.clear()  # free GPUs changed

    def _over_quota(self, job: Job, need: int) -> bool:
        """Does the job's account (or a level of the quota tree) no longer have room for it? Jobs
        of the account placed after this one may have taken the rest: it then waits for that."""
        d, snap = self.d, self.d.snap
        quota = snap.account_quotas.get(job.account)
        if quota is not None and d.account_gpus.get(job.account, 0) + need > quota:
            d.wait(job, Reason.QUOTA, f"account {job.account} quota {quota} GPUs", need)
            return True
        block = quotas.gate(snap.quotas, d.account_gpus, job.account, need, waiting=d.waiting)
        if block is not None:
            d.wait(job, block.reason, block.detail, need)
            return True
        return False

    def _carry_out(self, job: Job, x: Want, need: int, found: victims.Victims[Placed]) -> None:
        """Shrink and preempt the victims found for ``job``; start it at once when shrinks alone
        made room (on exactly the GPUs they released) without a notice, else it waits for the
        signalled jobs."""
        d = self.d
        self.served += 1
        for v, kept, gone in found.shrinks:
            d.shrink(v, v.job.min_replicas, kept, gone)
        for v, grace in zip(found.kills, found.graces, strict=True):
            d.preempt(Preempt(v.job_id, grace, Reason.PRIORITY, job.job_id, v.gpus))
            self.churn += v.gpus
        if found.kills:
            d.wait(job, Reason.PREEMPTING, f"signalled {', '.join(k.job_id for k in found.kills)}", need)
        elif found.notice_s > 0:  # noticed shrinks: their GPUs come after the notice
            d.wait(job, Reason.PREEMPTING, f"shrinking {', '.join(v.job_id for v, _, _ in found.shrinks)} "
                   f"after a {found.notice_s:g} s notice", need)
        elif found.placed is not None:
            d.start(job, found.placed, x.min_replicas)


__all__ = ["EvictPhase"]
