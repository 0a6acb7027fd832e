"""Cycle phases that start and size jobs: admit + place (with start-small, backfill and bounded
waiting for a leaf), shrink before placement, grow after it. Each takes the cycle's
:class:`~railgang.daemon.core.work.Work`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from railgang.daemon.core import elastic, hetero
from railgang.daemon.core import quota as quotas
from railgang.daemon.core.actions import Resize, Start
from railgang.daemon.core.gang import Placed, Unplaceable, gang_for
from railgang.daemon.core.job import Job, RunningJob, gpu_count
from railgang.daemon.core.needs import fleet_summary
from railgang.daemon.core.policy import Plan, Want
from railgang.daemon.core.reasons import Reason, reason_for
from railgang.daemon.core.work import INF, Work


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one start attempt did: the ``Start`` it emitted, or why the job waits."""

    started: Start | None = None
    failure: Unplaceable | None = None  # the last placement miss; None: no size was tried
    for_leaf: bool = False  # a size placed, but only across leaves, and the job waits for a leaf

    @property
    def reason(self) -> Reason:
        """Why the job waits (only meaningful when nothing started)."""
        if self.for_leaf:
            return Reason.WAITING_FOR_LEAF
        return Reason.WAITING_FOR_GPUS if self.failure is None else reason_for(self.failure.code)


class LeafWait:
    """Bounded waiting for a leaf (``CycleConfig.leaf_wait_s``/``leaf_holds``).

    A gang that must span nodes, that one leaf could hold, and that was submitted less than
    ``wait_s`` ago does not start across leaves; while it waits (for a leaf, or for GPUs at all)
    it holds the free GPUs of the leaf with the most of them, so the jobs after it in the order
    do not fill that leaf. Holds are per cycle: the core keeps no state, the next cycle holds
    again (the same leaf unless another has since freed more). Leaves come from the fabric's
    ``leaf_of``; capacity counts usable nodes only.
    """

    def __init__(self, w: Work, wait_s: float, holds: int) -> None:
        self.w, self.wait_s, self.holds = w, wait_s, holds
        self.held: list[str] = []
        self._cap: dict[str, int] | None = None
        self._node_gpus = 0

    def _leaf(self, node: str) -> str:
        return str(self.w.snap.fabric.leaf_of(node))

    @property
    def cap(self) -> dict[str, int]:
        """GPUs of the usable nodes of each leaf."""
        if self._cap is None:
            fabric, cap = self.w.snap.fabric, dict[str, int]()
            for name, node in self.w.snap.nodes.items():
                if node.state.usable and name in fabric:
                    cap[self._leaf(name)] = cap.get(self._leaf(name), 0) + node.gpus
                    self._node_gpus = max(self._node_gpus, node.gpus)
            self._cap = cap
        return self._cap

    def applies(self, job: Job, gpus: int) -> bool:
        """``gpus`` of ``job`` must span nodes, one leaf could hold them, the bound has not passed
        (never, on a fabric without leaves, e.g. a test's stand-in)."""
        if self.wait_s <= 0 or self.w.now - job.submit_time >= self.wait_s:
            return False
        if not hasattr(self.w.snap.fabric, "leaf_of"):
            return False
        cap = self.cap  # also finds the largest node
        return self._node_gpus < gpus <= max(cap.values(), default=0)

    def spread(self, job: Job, gpus: int, placed: Placed) -> bool:
        """True if ``placed`` spans leaves while the job should wait for one leaf instead."""
        return self.applies(job, gpus) and len({self._leaf(n) for n in placed.assignment}) > 1

    def hold(self, job: Job, gpus: int) -> str | None:
        """Hold the free GPUs of the leaf with the most free GPUs that could hold ``gpus``
        (ties: fabric order) from the rest of this cycle; None if no hold is left or applies."""
        if len(self.held) >= self.holds or not self.applies(job, gpus):
            return None
        w, order = self.w, {leaf: i for i, leaf in enumerate(self.w.snap.fabric.leaves)}
        free: dict[str, int] = {}
        for n, g in w.free.items():
            if n in w.snap.fabric:
                free[self._leaf(n)] = free.get(self._leaf(n), 0) + len(g)
        cands = [(-free.get(lf, 0), order.get(lf, 0), lf) for lf, c in self.cap.items()
                 if c >= gpus and lf not in self.held]
        if not cands:
            return None
        leaf = min(cands)[2]
        self.held.append(leaf)
        w.take({n: tuple(sorted(g)) for n, g in w.free.items()
                if n in w.snap.fabric and self._leaf(n) == leaf})
        return leaf


def _runtime(job: Job, replicas: int) -> float:
    left = job.remaining_at(replicas)
    if left is not None:
        return left
    return job.time_limit_s if job.time_limit_s is not None else INF


def _sizes(job: Job, want: Want, free_count: int) -> list[int]:
    """Start sizes to try: the wanted size, then halves of it down to the minimum (whole halves:
    an odd size leaves partial nodes that scatter later gangs, issue 12 part 4)."""
    out = [want.replicas]
    k, fit = want.replicas, free_count // job.replica_gpus
    while k // 2 > want.min_replicas:
        k //= 2
        if k <= fit:
            out.append(k)
    if want.min_replicas < want.replicas:
        out.append(want.min_replicas)
    return sorted(set(out), reverse=True)


def _needs_unmet(w: Work, job: Job) -> str:
    """Why the job's needs rule it out on this cluster (fewer GPUs meet them than its minimum
    size), listing what exists; "" when they do not."""
    nodes = w.eligible(job)
    if nodes is None:
        return ""
    have = sum(w.snap.nodes[n].gpus for n in nodes)
    if have >= job.min_gpus:
        return ""
    fleet = fleet_summary((n.gpus, n.facts) for n in w.snap.nodes.values() if n.state.usable)
    return f"{have} GPUs meet {job.needs.render()}; the cluster has {fleet}"


def _head_nodes(w: Work, job: Job, x: Want) -> frozenset[str] | None:
    """Nodes whose GPUs ``job`` may use: those meeting its needs, within its pools on a mixed
    cluster; None when any node will do (the reservation then counts every GPU)."""
    nodes = w.eligible(job)
    if x.pools and w.pools.mixed:
        names = frozenset().union(*(w.pools.nodes.get(k, frozenset()) for k in x.pools))
        if names != frozenset().union(*w.pools.nodes.values()):
            nodes = names if nodes is None else nodes & names
    return nodes


def _shadow_on(w: Work, nodes: frozenset[str], need: int) -> tuple[float, int]:
    """``Work.shadow`` counting only GPUs on ``nodes``: when ``need`` of them are free by the
    expected ends of the jobs holding them (running, and started this cycle), and how many of
    them are spare then."""
    avail = sum(len(g) for n, g in w.free.items() if n in nodes)
    ends = []
    for run in w.snap.running.values():
        held = sum(len(g) for n, g in run.assignment.items() if n in nodes)
        if held:
            ends.append((run.expected_end(w.now), held))
    pending = {j.job_id: j for j in w.snap.pending}
    for st in w.starts:
        held = sum(len(g) for n, g in st.assignment.items() if n in nodes) if isinstance(st, Start) else 0
        if held:
            assert isinstance(st, Start)
            left = pending[st.job_id].remaining_at(st.replicas) if st.job_id in pending else None
            ends.append((w.now + left if left is not None else INF, held))
    t = w.now
    for end, held in sorted(ends):
        if avail >= need:
            break
        avail, t = avail + held, end
    return (t, avail - need) if avail >= need else (INF, 0)


def _try_start(w: Work, job: Job, want: Want, fits: Callable[[int], bool | frozenset[str]],
               leaf: LeafWait | None = None) -> Attempt:
    """Start ``job`` at the largest acceptable size that places (inside one leaf while ``leaf``
    says it should wait for one); stop at a miss that no freed GPU can cure (the request itself
    cannot be met). ``fits(k)``: True, False, or the nodes the start must avoid (those of the
    backfill reservation it would outlast)."""
    failure: Unplaceable | None = None
    for_leaf = False
    for k in _sizes(job, want, w.free_count):
        gpus = k * job.replica_gpus
        ok = fits(k)
        if gpus > w.free_count or ok is False:
            continue
        avoid = ok if isinstance(ok, frozenset) else frozenset()
        if k < want.replicas:
            wait_s = w.shadow(want.replicas * job.replica_gpus)[0] - w.now
            if not elastic.start_small_pays(job, k, want.replicas, wait_s):
                continue
        res = hetero.place(w, job, want, k, avoid)  # one GPU pool at a time (w.place on one)
        if isinstance(res, Placed):
            if leaf is not None and leaf.spread(job, gpus, res):
                for_leaf = True  # a smaller size may still fit one leaf
                continue
            return Attempt(started=w.start(job, res, k))
        if avoid:
            continue  # missed beside the reservation only: the job waits behind it
        failure = res
        if res.code.about_the_request:
            break
    return Attempt(failure=failure, for_leaf=for_leaf)


class PlacePhase:
    """Admit + place, called once per priority class (higher first); keeps the queue state
    (strict head, backfill reservation) across classes."""

    def __init__(self, w: Work, plan: Plan, *, leaf_wait_s: float = 0.0, leaf_holds: int = 0) -> None:
        self.w, self.plan = w, plan
        self.head: str | None = None
        self.shadow_t, self.extra = INF, 0
        # nodes whose GPUs the reserved head can use (None: any; set when it has needs or pools)
        self.head_nodes: frozenset[str] | None = None
        self.leaf = LeafWait(w, leaf_wait_s, leaf_holds) if leaf_wait_s > 0 else None

    def run(self, order: list[Want], jobs: Mapping[str, Job]) -> None:
        w, plan = self.w, self.plan
        for x in order:
            job = jobs[x.job_id]
            need = x.min_replicas * job.replica_gpus
            if job.min_gpus > w.total:
                w.wait(job, Reason.LARGER_THAN_CLUSTER, f"cluster has {w.total} GPUs", job.min_gpus)
                continue
            unmet = _needs_unmet(w, job)
            if unmet:
                w.wait(job, Reason.NEEDS_UNMET, unmet, job.min_gpus)
                continue
            quota = w.snap.account(job.account).quota_gpus
            if quota is not None and w.account_gpus.get(job.account, 0) + need > quota:
                w.wait(job, Reason.QUOTA, f"account {job.account} quota {quota} GPUs", need)
                continue
            block = quotas.gate(w.snap.quotas, w.account_gpus, job.account, need,
                                waiting=w.waiting, free=w.free_count)
            if block is not None:  # a level of the quota tree binds (reclaim may free it)
                w.wait(job, block.reason, block.detail, need)
                continue
            if self.head is not None and plan.mode == "strict":
                w.wait(job, Reason.PRIORITY, f"FIFO: behind {self.head}", need)
                continue
            attempt = _try_start(w, job, x, self._fits(job, quota), self.leaf)
            st = attempt.started
            if st is not None:
                if self.head is not None and w.now + _runtime(job, st.replicas) > self.shadow_t:
                    hn = self.head_nodes  # backfilled beside the reservation: uses spare GPUs
                    self.extra -= st.gpus if hn is None else sum(
                        len(g) for n, g in st.assignment.items() if n in hn)
                continue
            if attempt.for_leaf:
                self._wait_for_leaf(job, x, need)
                continue
            if attempt.failure is not None and attempt.failure.code.about_the_request:
                w.wait(job, attempt.reason, attempt.failure.detail, need)  # no eviction can help
                continue
            self._missed(job, x, attempt.reason, need)
            held = self.leaf.hold(job, x.replicas * job.replica_gpus) if self.leaf else None
            if held is not None:  # waiting for GPUs, and keeping one leaf for them meanwhile
                r = w.reasons[job.job_id]
                w.reasons[job.job_id] = dataclasses.replace(
                    r, detail=f"{r.detail}; holding leaf {held}".lstrip("; "))

    def _wait_for_leaf(self, job: Job, x: Want, need: int) -> None:
        """The job placed only across leaves: it waits for one leaf (no eviction serves it; in
        ``strict`` mode it is the head that blocks the queue) and holds one if a hold is left."""
        w, leaf = self.w, self.leaf
        assert leaf is not None  # only LeafWait makes an attempt wait for a leaf
        w.blocked_classes.add(job.priority_class)
        if self.head is None and self.plan.mode == "strict":
            self.head = job.job_id
        left = leaf.wait_s - (w.now - job.submit_time)
        held = leaf.hold(job, x.replicas * job.replica_gpus)
        where = f"; holding leaf {held}" if held else ""
        w.wait(job, Reason.WAITING_FOR_LEAF,
               f"free GPUs only across leaves; waits up to {left:.0f}s more for one leaf{where}", need)

    def _fits(self, job: Job, quota: int | None) -> Callable[[int], bool | frozenset[str]]:
        w, mode, head, shadow_t, extra = self.w, self.plan.mode, self.head, self.shadow_t, self.extra
        head_nodes = self.head_nodes
        room = INF if quota is None else quota - w.account_gpus.get(job.account, 0)
        room = min(room, quotas.room(w.snap.quotas, w.account_gpus, job.account, waiting=w.waiting))

        def fits(k: int) -> bool | frozenset[str]:
            if k * job.replica_gpus > room:
                return False  # a start above the minimum must respect the quota too
            if head is None or mode != "backfill":
                return True
            if w.now + _runtime(job, k) <= shadow_t or k * job.replica_gpus <= extra:
                return True
            if head_nodes is None:
                return False
            # GPUs the reserved job cannot use never delay it: start there, or not at all
            off = sum(len(g) for n, g in w.free.items() if n not in head_nodes)
            return head_nodes if off >= k * job.replica_gpus else False

        return fits

    def _missed(self, job: Job, x: Want, why: Reason, need: int) -> None:
        w, plan = self.w, self.plan
        w.blocked_classes.add(job.priority_class)
        may_reserve = plan.mode == "strict" or (
            plan.mode == "backfill" and (plan.reserve_for is None or job.job_id in plan.reserve_for))
        if self.head is None and may_reserve:
            self.head = job.job_id
            if plan.mode == "backfill":
                self.head_nodes = _head_nodes(w, job, x)
                if self.head_nodes is None:
                    self.shadow_t, self.extra = w.shadow(x.replicas * job.replica_gpus)
                else:  # only the GPUs meeting its needs (and in its pools) free up for it
                    self.shadow_t, self.extra = _shadow_on(w, self.head_nodes,
                                                           x.replicas * job.replica_gpus)
                w.reserved = True
                w.wait(job, Reason.RESERVED, f"reserved start at t={self.shadow_t:.0f}", need)
                return
        elif self.head is not None and plan.mode == "backfill" and why is Reason.WAITING_FOR_GPUS:
            why = Reason.PRIORITY  # would delay the reserved head job
        detail = ("topology has no valid gang slot" if why is Reason.FRAGMENTED else
                  "the free GPUs that fit are on quarantined nodes" if why is Reason.QUARANTINED
                  else f"too few free GPUs on the nodes that meet {job.needs.render()}"
                  if why is Reason.NO_ELIGIBLE_CAPACITY else "")
        w.wait(job, why, detail, need)


def _targets(w: Work, plan: Plan) -> list[tuple[RunningJob, int]]:
    out = []
    for run in w.snap.elastic_running:
        job = run.job
        if run.job_id in w.touched or run.preempt_deadline is not None:
            continue
        target = plan.targets.get(run.job_id, elastic.default_target(run))
        out.append((run, max(job.min_replicas, min(job.max_replicas, target))))
    return out


def shrink_phase(w: Work, plan: Plan, rules: elastic.ElasticRules) -> None:
    """Apply the plan's shrink targets first: the GPUs they free serve this cycle's starts."""
    for run, target in _targets(w, plan):
        if target < run.replicas and elastic.resize_pays(run, target, w.now, rules):
            kept, gone = elastic.shrink_assignment(run, target)
            w.shrinks.append(Resize(run.job_id, target, kept, run.replicas))
            w.touched.add(run.job_id)
            w.give(gone)


def grow_phase(w: Work, plan: Plan, rules: elastic.ElasticRules) -> None:
    """Grow elastic jobs into what is left, by whole replicas, if the marginal gain pays."""
    for run, target in _targets(w, plan):
        job = run.job
        if target <= run.replicas or run.job_id in w.touched:
            continue
        higher_waits = any(c < job.priority_class for c in w.blocked_classes)
        same_waits = job.priority_class in w.blocked_classes
        if (higher_waits or same_waits) and w.reserved:
            continue  # growing could delay the reserved job
        if higher_waits and not plan.sized:
            continue  # leftover GPUs belong to waiting work of a higher class
        if same_waits and not plan.sized:
            # a job started small (or shrunk) regrows to its requested size first — that is the
            # promise start-small was made on; growing beyond it waits until nobody of its class does
            target = min(target, max(run.replicas, job.replicas))
            if target <= run.replicas:
                continue
        _grow_to(w, run, target, rules)


def _grow_to(w: Work, run: RunningJob, target: int, rules: elastic.ElasticRules) -> None:
    job = run.job
    if target <= run.replicas:
        return
    quota = w.snap.account(job.account).quota_gpus
    room = w.free_count if quota is None else min(w.free_count, quota - w.account_gpus.get(job.account, 0))
    room = int(min(room, quotas.room(w.snap.quotas, w.account_gpus, job.account, waiting=w.waiting)))
    top = min(target, run.replicas + max(0, room) // job.replica_gpus)
    k = max((x for x in elastic.sizes(job) if run.replicas < x <= top), default=run.replicas)
    while k > run.replicas and elastic.resize_pays(run, k, w.now, rules):
        res = w.place(gang_for(job, k - run.replicas, hetero.grow_nodes(w, run)))
        if isinstance(res, Placed):
            merged = {n: tuple(run.assignment.get(n, ())) + tuple(res.assignment.get(n, ()))
                      for n in set(run.assignment) | set(res.assignment)}
            w.take(res.assignment)
            w.account_gpus[job.account] = w.account_gpus.get(job.account, 0) + gpu_count(res.assignment)
            w.grows.append(Resize(run.job_id, k, merged, run.replicas))
            w.touched.add(run.job_id)
            break
        k = max((x for x in elastic.sizes(job) if run.replicas < x < k), default=run.replicas)


__all__ = ["LeafWait", "PlacePhase", "grow_phase", "shrink_phase"]
