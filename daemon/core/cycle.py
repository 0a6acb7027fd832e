"""One decision cycle: ``decide(snapshot, policy, now, rng) -> Decision(actions, reasons)``.

Pure and deterministic (STYLE 1): the same snapshot, policy, ``now`` and rng state give the same
decision; no I/O, no clock reads that influence a decision (``phase_ms`` is measurement only and
is excluded from equality). The recipe:

1. **observe** — a private working copy of the free GPUs, per-account usage and the churn spent.
2. **order**   — ``policy.plan``; the plan's order is kept inside each priority class, classes
   first (0 serving … 3 batch), so ordering key = (class, policy rank).
3. **size**    — shrinks the plan asks for (Pollux) run first; their GPUs serve this cycle.
4. **admit + place** — reject what can never run (larger than the cluster), hold what breaks a
   quota, then walk the order; each job is placed all-or-nothing by ``topology`` at its wanted
   size, or smaller down to its minimum if starting small beats waiting (``elastic``). ``strict``
   stops at the first miss, ``backfill`` reserves the head's start (EASY), ``greedy`` skips.
5. **preempt** — for jobs still waiting: shrink elastic lower work first, then preempt whole jobs,
   within the class rules, budgets and cascade damping (``preemption``); signal + grace.
6. **grow**    — grow running elastic jobs toward the plan's targets with anti-churn rules.
7. **emit**    — actions in order (shrinks, preempts, starts, grows, node tags, priorities) and
   one reason per waiting job; nodes the link health quarantines get a ``TagNode``.

Within one cycle free GPUs only shrink (shrinks release GPUs to the job they were made for), so a
gang shape that failed once fails for the rest of the cycle: such shapes are cached.
"""

from __future__ import annotations

import bisect
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from daemon.core import elastic
from daemon.core import preemption as pre
from daemon.core.actions import Action, Assignment, Preempt, Resize, SetPriority, Start, TagNode
from daemon.core.gang import GangSpec, NotPlaced, Placed, Placer, topology_placer
from daemon.core.job import Job, RunningJob
from daemon.core.policy import Plan, Policy, Want
from daemon.core.reasons import PendingReason, Reason
from daemon.core.snapshot import Snapshot

INF = float("inf")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CycleConfig:
    budget: pre.PreemptionBudget = field(default_factory=pre.PreemptionBudget)
    elastic: elastic.ElasticRules = field(default_factory=elastic.ElasticRules)
    preempt: bool = True  # allow the preempt phase at all
    resize: bool = True  # allow the size and grow phases at all
    emit_priorities: bool = False  # also emit SetPriority per waiting job (backends that reorder
    # Slurm's own queue); rank = position in the final order, larger = sooner
    lame_link_tag: str = "lame-link"  # TagNode for nodes the link health quarantines


@dataclass(frozen=True)
class Decision:
    actions: tuple[Action, ...]
    reasons: tuple[PendingReason, ...]
    phase_ms: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)

    def reason(self, job_id: str) -> PendingReason | None:
        return next((r for r in self.reasons if r.job_id == job_id), None)

    def of(self, kind: type[Action]) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if isinstance(a, kind))


def decide(
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    rng: random.Random,
    *,
    config: CycleConfig = CycleConfig(),
    placer: Placer = topology_placer,
) -> Decision:
    """Run one cycle (see the module docstring for the recipe)."""
    clock, ms = time.perf_counter(), {}

    def lap(phase: str) -> None:
        nonlocal clock
        t = time.perf_counter()
        ms[phase] = (t - clock) * 1e3
        clock = t

    w = _Work(snapshot, now, placer, rng.randrange(2**31))  # 1. observe
    lap("observe")
    plan = policy.plan(snapshot, now)  # 2. order
    jobs = {j.job_id: j for j in snapshot.pending}
    order = sorted(
        (x for x in plan.order if x.job_id in jobs),
        key=lambda x: jobs[x.job_id].priority_class,  # stable: keeps the policy's rank
    )
    lap("order")
    if config.resize:  # 3. size: shrinks the plan asks for free GPUs for this cycle's starts
        _shrink(w, plan, config.elastic)
    lap("size")
    _place(w, plan, order, jobs)  # 4. admit + place
    lap("place")
    if config.preempt:  # 5. preempt: shrink lower work first, then evict within budgets
        _preempt(w, plan, order, jobs, config.budget)
    lap("preempt")
    if config.resize:  # 6. grow elastic jobs into what is left, if the marginal gain pays
        _grow(w, plan, config.elastic)
    lap("grow")
    for j in snapshot.pending:  # 7. emit: every job left waiting has a reason
        if j.job_id not in w.started and j.job_id not in w.reasons:
            w.wait(j, Reason.PRIORITY, "not ordered by the policy this cycle", j.min_gpus)
    hygiene: list[Action] = [
        TagNode(n, config.lame_link_tag) for n in sorted(_quarantined(snapshot))
        if n in snapshot.nodes and config.lame_link_tag not in snapshot.nodes[n].tags
    ]
    if config.emit_priorities:
        waiting = [x.job_id for x in order if x.job_id not in w.started]
        hygiene += [SetPriority(j, len(waiting) - i) for i, j in enumerate(waiting)]
    actions = tuple(w.shrinks + w.preempts + w.starts + w.grows + hygiene)
    reasons = tuple(w.reasons[j.job_id] for j in snapshot.pending if j.job_id in w.reasons)
    lap("emit")
    if log.isEnabledFor(logging.DEBUG):
        log.debug("cycle %s now=%.0f pending=%d actions=%d phases=%s", policy.name, now,
                  len(snapshot.pending), len(actions), {k: round(v, 2) for k, v in ms.items()})
    return Decision(actions, reasons, MappingProxyType(ms))


def _quarantined(snapshot: Snapshot) -> set[str]:
    """Nodes the topology link health quarantines (empty without health data)."""
    q = getattr(snapshot.health, "quarantined", None)
    return set(q) if q else set()


class _Work:
    """Mutable scratch state private to one ``decide`` call (never escapes it)."""

    def __init__(self, snap: Snapshot, now: float, placer: Placer, seed: int) -> None:
        self.snap, self.now, self.placer, self.seed = snap, now, placer, seed
        self.free: dict[str, frozenset[int]] = {n: g for n, g in snap.free.items() if g}
        self.free_count = sum(len(g) for g in self.free.values())
        self.total = snap.total_gpus
        self.failed: set[tuple[int, int, int, float, bool]] = set()
        self.account_gpus = snap.account_running_gpus()
        self.started: set[str] = set()
        self.touched: set[str] = set()  # running jobs shrunk, grown or preempted this cycle
        self.reasons: dict[str, PendingReason] = {}
        self.starts: list[Action] = []
        self.shrinks: list[Action] = []
        self.preempts: list[Action] = []
        self.grows: list[Action] = []
        self.blocked_classes: set[int] = set()  # classes with a job waiting for GPUs
        self.reserved = False
        self._ends: list[tuple[float, int]] | None = None  # running jobs' expected ends, lazily

    @property
    def ends(self) -> list[tuple[float, int]]:
        if self._ends is None:
            self._ends = sorted((r.expected_end(self.now), r.gpus) for r in self.snap.running.values())
        return self._ends

    # -- placement ---------------------------------------------------------------------------
    def place(self, spec: GangSpec, free: Mapping[str, frozenset[int]] | None = None) -> Placed | NotPlaced:
        if free is None:
            if spec.key in self.failed:
                return NotPlaced("cached", "same gang shape failed earlier this cycle")
            res = self.placer(self.snap.fabric, self.free, spec, health=self.snap.health, seed=self.seed)
            if isinstance(res, NotPlaced):
                self.failed.add(spec.key)
            return res
        return self.placer(self.snap.fabric, free, spec, health=self.snap.health, seed=self.seed)

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

    def start(self, job: Job, placed: Placed, replicas: int) -> None:
        self.take(placed.assignment)
        self.starts.append(Start(job.job_id, placed.assignment, replicas, placed.cost))
        self.started.add(job.job_id)
        self.account_gpus[job.account] = self.account_gpus.get(job.account, 0) + replicas * job.replica_gpus
        if self._ends is not None:
            left = job.remaining_at(replicas)
            bisect.insort(self._ends, (self.now + left if left is not None else INF, replicas * job.replica_gpus))

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


def res_gpus(placed: Placed) -> int:
    return sum(len(g) for g in placed.assignment.values())


def _runtime(job: Job, replicas: int) -> float:
    left = job.remaining_at(replicas)
    if left is not None:
        return left
    return job.time_limit_s if job.time_limit_s is not None else INF


def _sizes(job: Job, want: Want, free_count: int) -> list[int]:
    """Start sizes to try: the wanted size, then smaller (halving) down to the minimum."""
    out = [want.replicas]
    k = min(want.replicas - 1, free_count // job.replica_gpus)
    while k > want.min_replicas:
        out.append(k)
        k //= 2
    if want.min_replicas < want.replicas:
        out.append(want.min_replicas)
    return sorted(set(out), reverse=True)


def _try_start(w: _Work, job: Job, want: Want, fits: Callable[[int], bool]) -> Reason | None:
    """Start ``job`` at the largest acceptable size; return why not (``None`` when started)."""
    why = Reason.WAITING_FOR_GPUS
    for k in _sizes(job, want, w.free_count):
        gpus = k * job.replica_gpus
        if gpus > w.free_count or not fits(k):
            continue
        if k < want.replicas:
            wait_s = w.shadow(want.replicas * job.replica_gpus)[0] - w.now
            if not elastic.start_small_pays(job, k, want.replicas, wait_s):
                continue
        res = w.place(GangSpec.for_job(job, k))
        if isinstance(res, Placed):
            w.start(job, res, k)
            return None
        if res.capability:
            return Reason.CAPABILITY
        why = Reason.FRAGMENTED
    return why


def _place(w: _Work, plan: Plan, order: list[Want], jobs: Mapping[str, Job]) -> None:
    head: str | None = None
    shadow_t, extra = INF, 0
    for x in order:
        job = jobs[x.job_id]
        need = x.min_replicas * job.replica_gpus
        if job.min_gpus > w.total:
            w.wait(job, Reason.LARGER_THAN_CLUSTER, f"cluster has {w.total} GPUs", job.min_gpus)
            continue
        quota = w.snap.account(job.account).quota_gpus
        if quota is not None and w.account_gpus.get(job.account, 0) + need > quota:
            w.wait(job, Reason.QUOTA, f"account {job.account} quota {quota} GPUs", need)
            continue
        if head is not None and plan.mode == "strict":
            w.wait(job, Reason.PRIORITY, f"FIFO: behind {head}", need)
            continue

        room = INF if quota is None else quota - w.account_gpus.get(job.account, 0)

        def fits(k: int, job: Job = job, head: str | None = head, shadow_t: float = shadow_t,
                 extra: int = extra, room: float = room) -> bool:
            if k * job.replica_gpus > room:
                return False  # a start above the minimum must respect the quota too
            if head is None or plan.mode != "backfill":
                return True
            return w.now + _runtime(job, k) <= shadow_t or k * job.replica_gpus <= extra

        why = _try_start(w, job, x, fits)
        if why is None:
            st = w.starts[-1]
            if head is not None and isinstance(st, Start) and w.now + _runtime(job, st.replicas) > shadow_t:
                extra -= st.gpus  # backfilled beside the reservation: uses the spare GPUs
            continue
        if why is Reason.CAPABILITY:
            w.wait(job, why, "no node meets the job's GPU memory / NVLink needs", need)
            continue
        w.blocked_classes.add(job.priority_class)
        may_reserve = plan.mode == "strict" or (
            plan.mode == "backfill" and (plan.reserve_for is None or job.job_id in plan.reserve_for))
        if head is None and may_reserve:
            head = job.job_id
            if plan.mode == "backfill":
                shadow_t, extra = w.shadow(x.replicas * job.replica_gpus)
                w.reserved = True
                w.wait(job, Reason.RESERVED, f"reserved start at t={shadow_t:.0f}", need)
                continue
        elif head is not None and plan.mode == "backfill" and why is Reason.WAITING_FOR_GPUS:
            why = Reason.PRIORITY  # would delay the reserved head job
        detail = "topology has no valid gang slot" if why is Reason.FRAGMENTED else ""
        w.wait(job, why, detail, need)


def _eligible(plan: Plan, requester: Job, level: float, v: RunningJob) -> bool:
    if pre.class_may_preempt(requester.priority_class, v.priority_class):
        return True
    return (plan.preempt_within_class and v.priority_class == requester.priority_class >= 2
            and plan.levels.get(v.job_id, level) > level)


def _preempt(w: _Work, plan: Plan, order: list[Want], jobs: Mapping[str, Job], budget: pre.PreemptionBudget) -> None:
    """Free GPUs for waiting jobs, in order: shrink elastic lower work, then evict whole jobs.

    Victims are ranked once (``preemption.victim_key``); a job with no eviction set leaves a
    memo for its (shape, class, level) so identical jobs behind it are answered without a search.
    """
    now, snap = w.now, w.snap
    gpus_of = {r.job_id: r.gpus for r in snap.running.values()}
    inflight = sum(gpus_of[r.job_id] for r in snap.running.values() if r.preempt_deadline is not None)
    churn = pre.churned_gpus(snap, now, budget.churn_window_s)
    cap = pre.churn_cap_gpus(snap, budget)
    ranked: list[RunningJob] | None = None  # victims in rank order, built on first need
    by_key: dict[tuple[int, float], list[RunningJob]] = {}
    hopeless: dict[tuple[object, ...], Reason | None] = {}
    served = 0
    for x in order:
        job = jobs[x.job_id]
        r = w.reasons.get(job.job_id)
        if r is None or r.code not in (Reason.WAITING_FOR_GPUS, Reason.FRAGMENTED, Reason.RESERVED):
            continue
        if served >= budget.max_evictions_per_cycle:
            break
        need = x.min_replicas * job.replica_gpus
        if job.priority_class == 3 and not plan.preempt_within_class:
            continue  # batch evicts nobody unless the policy ranks inside the class
        ck = (job.priority_class, x.level)
        if ck not in by_key:
            if ranked is None:
                ranked = sorted(
                    (r for r in snap.running.values() if r.preempt_deadline is None and r.priority_class != 0),
                    key=lambda v: pre.victim_key(v, plan.levels.get(v.job_id, 0.0), now),
                )
            by_key[ck] = [v for v in ranked if _eligible(plan, job, x.level, v)]
        cands = [v for v in by_key[ck] if v.job_id not in w.touched]
        if not cands:
            continue
        if inflight > 0 and w.free_count < need <= w.free_count + inflight:
            inflight -= need - w.free_count  # GPUs already signalled are this job's
            w.wait(job, Reason.PREEMPTING, "waiting for signalled jobs to exit", need)
            continue
        if pre.recently_preempted(job.last_preempted_at, now, budget.cascade_window_s):
            w.wait(job, Reason.CASCADE_DAMPED, "evicted recently; may not evict others yet", need)
            continue
        memo = (GangSpec.for_job(job, x.min_replicas).key, ck, job.priority_class == 0)
        if memo in hopeless:
            code = hopeless[memo]
            if code is not None:
                w.wait(job, code, "eviction would exceed a preemption budget", need)
            continue
        if w.free_count + sum(gpus_of[v.job_id] for v in cands) < need:
            hopeless[memo] = None
            continue
        outcome = _evict_for(w, job, x, cands, gpus_of, budget, churn, cap)
        if outcome is None or isinstance(outcome, Reason):
            hopeless[memo] = outcome
            if outcome is not None:
                w.wait(job, outcome, "eviction would exceed a preemption budget", need)
            continue
        placed, shrinks, kills = outcome
        served += 1
        for v, kept, gone in shrinks:
            w.shrinks.append(Resize(v.job_id, v.job.min_replicas, kept, v.replicas))
            w.touched.add(v.job_id)
            w.give(gone)
        for v in kills:
            w.preempts.append(Preempt(v.job_id, pre.grace_for(v, budget), Reason.PRIORITY, job.job_id,
                                      gpus_of[v.job_id]))
            w.touched.add(v.job_id)
            churn += gpus_of[v.job_id]
        if kills:
            w.wait(job, Reason.PREEMPTING, f"signalled {', '.join(k.job_id for k in kills)}", need)
        else:  # shrinks alone made room: start now on exactly the GPUs they released
            w.start(job, placed, x.min_replicas)
            w.reasons.pop(job.job_id, None)
        hopeless.clear()  # free GPUs changed


_Shrink = tuple[RunningJob, Assignment, Assignment]


def _evict_for(
    w: _Work, job: Job, x: Want, cands: list[RunningJob], gpus_of: Mapping[str, int],
    budget: pre.PreemptionBudget, churn: int, cap: int,
) -> tuple[Placed, list[_Shrink], list[RunningJob]] | Reason | None:
    """The first victim set (shrinks first, then whole jobs, in rank order) that lets ``job`` be
    placed; a Reason when only a budget stands in the way; ``None`` when nothing would do."""
    now, need = w.now, x.min_replicas * job.replica_gpus
    shrinks: list[_Shrink] = []
    kills: list[RunningJob] = []
    extra: dict[str, frozenset[int]] = dict(w.free)
    got, killed, budget_hit, tries = w.free_count, 0, False, 0
    steps = [(False, v) for v in cands if v.replicas > v.job.min_replicas] + [(True, v) for v in cands]
    for kill, v in steps:
        if kill:
            if pre.recently_preempted(v.job.last_preempted_at, now, budget.job_min_interval_s):
                budget_hit = True
                continue
            if job.priority_class > 0 and churn + killed + gpus_of[v.job_id] > cap:
                budget_hit = True
                continue
            shrunk = next((s for s in shrinks if s[0].job_id == v.job_id), None)
            gone: Assignment = v.assignment
            if shrunk is not None:
                shrinks.remove(shrunk)
                gone = shrunk[1]  # the part the shrink would have kept goes too
            kills.append(v)
            killed += gpus_of[v.job_id]
        else:
            kept, gone = elastic.shrink_assignment(v, v.job.min_replicas)
            shrinks.append((v, kept, gone))
        for n, gs in gone.items():
            extra[n] = extra.get(n, frozenset()) | frozenset(gs)
            got += len(gs)
        if got >= need and tries < 4:
            tries += 1
            placed = w.place(GangSpec.for_job(job, x.min_replicas), extra)
            if isinstance(placed, Placed):
                return placed, shrinks, kills
    return Reason.PREEMPTION_BUDGET if budget_hit else None


def _targets(w: _Work, plan: Plan) -> list[tuple[RunningJob, int]]:
    out = []
    for run in w.snap.running.values():
        job = run.job
        if not job.elastic or run.job_id in w.touched or run.preempt_deadline is not None:
            continue
        target = plan.targets.get(run.job_id, elastic.default_target(run))
        out.append((run, max(job.min_replicas, min(job.max_replicas, target))))
    return out


def _shrink(w: _Work, plan: Plan, rules: elastic.ElasticRules) -> None:
    """Apply the plan's shrink targets first: the GPUs they free serve this cycle's starts."""
    for run, target in _targets(w, plan):
        if target < run.replicas and elastic.resize_pays(run, target, w.now, rules):
            kept, gone = elastic.shrink_assignment(run, target)
            w.shrinks.append(Resize(run.job_id, target, kept, run.replicas))
            w.touched.add(run.job_id)
            w.give(gone)


def _grow(w: _Work, plan: Plan, rules: elastic.ElasticRules) -> None:
    """Grow elastic jobs into what is left, by whole replicas, if the marginal gain pays."""
    for run, target in _targets(w, plan):
        job = run.job
        if target <= run.replicas:
            continue
        waiting_above = any(c <= job.priority_class for c in w.blocked_classes)
        if waiting_above and (w.reserved or run.job_id not in plan.targets):
            continue  # leftover GPUs belong to waiting work of the same or a higher class
        quota = w.snap.account(job.account).quota_gpus
        room = w.free_count if quota is None else min(w.free_count, quota - w.account_gpus.get(job.account, 0))
        k = min(target, run.replicas + max(0, room) // job.replica_gpus)
        while k > run.replicas and elastic.resize_pays(run, k, w.now, rules):
            res = w.place(GangSpec.for_job(job, k - run.replicas))
            if isinstance(res, Placed):
                merged = {n: tuple(run.assignment.get(n, ())) + tuple(res.assignment.get(n, ()))
                          for n in set(run.assignment) | set(res.assignment)}
                w.take(res.assignment)
                w.account_gpus[job.account] = w.account_gpus.get(job.account, 0) + res_gpus(res)
                w.grows.append(Resize(run.job_id, k, merged, run.replicas))
                w.touched.add(run.job_id)
                break
            k = run.replicas + (k - run.replicas) // 2


__all__ = ["CycleConfig", "Decision", "decide"]
