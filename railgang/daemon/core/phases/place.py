"""The place phase: admit + place each waiting job of one priority class, with start-small,
backfill (EASY reservations) and bounded waiting for a leaf, writing only through the cycle's
:class:`~railgang.daemon.core.phases.draft.Draft`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from railgang.daemon.core.model import elastic
from railgang.daemon.core.model import quota as quotas
from railgang.daemon.core.model.actions import Action, Start
from railgang.daemon.core.model.gang import Placed, Unplaceable
from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.needs import fleet_summary
from railgang.daemon.core.model.plan import Plan, Want
from railgang.daemon.core.model.reasons import PendingReason, Reason, reason_for
from railgang.daemon.core.model.shadow import Ends
from railgang.daemon.core.model.signature import Signature, signature, time_key
from railgang.daemon.core.phases.draft import INF, Draft
from railgang.daemon.core.phases.leaf_wait import LeafWait
from railgang.daemon.core.phases.pool_place import place


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


def _needs_unmet(d: Draft, job: Job) -> str:
    """Why the job's needs rule it out on this cluster (fewer GPUs meet them than its minimum
    size), listing what exists; "" when they do not."""
    nodes = d.eligible(job, room=False)  # CPUs and memory taken now are a wait, not a need unmet
    if nodes is None:
        return ""
    have = sum(d.snap.nodes[n].gpus for n in nodes)
    if have >= job.min_gpus:
        return ""
    if job.request.serving:  # a replica waits for its pool's nodes to come back (model/serving.py)
        return (f"{have} GPUs of serving deployment {job.request.serving}'s pool are held for "
                f"replicas now (the rest is lent), {job.min_gpus} needed")
    fleet = fleet_summary((n.gpus, n.facts) for n in d.snap.nodes.values() if n.state.usable)
    if job.needs.nodes is not None:  # Slurm's own rules narrow where it may run
        return f"{have} GPUs on {job.needs.on()}; the cluster has {fleet}"
    return f"{have} GPUs meet {job.needs.render() or 'its class on serving pools'}; the cluster has {fleet}"


def _head_nodes(d: Draft, job: Job, x: Want) -> frozenset[str] | None:
    """Nodes whose GPUs ``job`` may use: those meeting its needs, within its pools on a mixed
    cluster; None when any node will do (the reservation then counts every GPU)."""
    nodes = d.eligible(job)
    if x.pools and d.pools.mixed:
        names = frozenset().union(*(d.pools.nodes.get(k, frozenset()) for k in x.pools))
        if names != frozenset().union(*d.pools.nodes.values()):
            nodes = names if nodes is None else nodes & names
    return nodes


def _shadow_on(d: Draft, nodes: frozenset[str], need: int) -> tuple[float, int]:
    """``Draft.shadow`` counting only GPUs on ``nodes``: when ``need`` of them are free by the
    expected ends of the jobs holding them (running, and started this cycle), and how many of
    them are spare then."""
    avail = sum(len(g) for n, g in d.free.items() if n in nodes)
    ends = []
    for run in d.snap.running.values():
        held = sum(len(g) for n, g in run.assignment.items() if n in nodes)
        if held:
            ends.append((run.expected_end(d.now), held))
    pending = {j.job_id: j for j in d.snap.pending}
    for st in d.starts:
        held = sum(len(g) for n, g in st.assignment.items() if n in nodes) if isinstance(st, Start) else 0
        if held:
            assert isinstance(st, Start)
            left = pending[st.job_id].remaining_at(st.replicas) if st.job_id in pending else None
            ends.append((d.now + left if left is not None else INF, held))
    return Ends.of(ends).when(avail, need, d.now)


@dataclass(frozen=True, slots=True)
class Held:
    """An admission check holds the job (larger than the cluster, needs unmet, quota, behind
    the strict head): it waits for ``code`` with ``detail``, needing ``needed`` GPUs."""

    code: Reason
    detail: str
    needed: int


Verdict = Held | Attempt  # what admission found: the job is held, or a start attempt's outcome


@dataclass(frozen=True, slots=True)
class Fit:
    """Whether a start of some size is allowed now, and the nodes it must then avoid: those whose
    GPUs the reserved backfill head can use (a start there would delay it)."""

    ok: bool
    avoid: frozenset[str] = frozenset()


FITS, NO_FIT = Fit(True), Fit(False)


def _try_start(d: Draft, job: Job, want: Want, fits: Callable[[int], Fit],
               leaf: LeafWait | None = None) -> Attempt:
    """Start ``job`` at the largest acceptable size that places (inside one leaf while ``leaf``
    says it should wait for one); stop at a miss that no freed GPU can cure (the request itself
    cannot be met). ``fits(k)``: whether size ``k`` may start, and the nodes it must avoid (those of the
    backfill reservation it would outlast)."""
    failure: Unplaceable | None = None
    for_leaf = False
    for k in _sizes(job, want, d.free_count):
        gpus = k * job.replica_gpus
        fit = fits(k)
        if gpus > d.free_count or not fit.ok:
            continue
        avoid = fit.avoid
        if k < want.replicas:
            wait_s = d.shadow(want.replicas * job.replica_gpus)[0] - d.now
            if not elastic.start_small_pays(job, k, want.replicas, wait_s):
                continue
        res = place(d, job, want, k, avoid)  # one GPU pool at a time (d.place on one)
        if isinstance(res, Placed):
            if leaf is not None and leaf.spread(job, gpus, res):
                for_leaf = True  # a smaller size may still fit one leaf
                continue
            return Attempt(started=d.start(job, res, k))
        if avoid:
            continue  # missed beside the reservation only: the job waits behind it
        failure = res
        if res.code.about_the_request:
            break
    return Attempt(failure=failure, for_leaf=for_leaf)


class PlacePhase:
    """Admit + place, called once per priority class (higher first); keeps the queue state
    (strict head, backfill reservation) across classes."""

    def __init__(self, d: Draft, plan: Plan, *, leaf_wait_s: float = 0.0, leaf_holds: int = 0,
                 leaf_wait_max_s: float = 0.0, whole_leaf_first: bool = False,
                 leaf_evict_after_s: float | None = None, backfill_held_leaf: bool = False) -> None:
        self.d, self.plan = d, plan
        self.head: str | None = None
        self.shadow_t, self.extra = INF, 0
        # nodes whose GPUs the reserved head can use (None: any; set when it has needs or pools)
        self.head_nodes: frozenset[str] | None = None
        self.searched = self.skipped = 0  # turns that searched, turns given a signature's verdict
        self.leaf = (LeafWait(d, leaf_wait_s, leaf_holds, leaf_wait_max_s, whole_leaf_first=whole_leaf_first,
                              evict_after_s=leaf_evict_after_s, lend=backfill_held_leaf)
                     if leaf_wait_s > 0 else None)

    def run(self, order: list[Want], jobs: Mapping[str, Job]) -> tuple[Action, ...]:
        """Start what fits, in ``order``; every job left waits with a reason. Returns the starts.

        A turn that ended in a wait and changed neither the free GPUs nor the head
        (``Draft.version``, ``self.head``) is the turn of every later job of its signature
        (``model/signature.py``) until one of them changes: those jobs are given its reason
        without a search, and recorded together at the end (``Draft.wait_behind``)."""
        d = self.d
        mark = d.mark()
        if self.leaf is not None:
            self.leaf.prehold(order, jobs)
        capped, tree = d.snap.account_quotas, d.snap.quotas
        lent = d.snap.serving is not None or bool(d.spares)
        reserving = self.plan.reserve_for if self.plan.mode == "backfill" else None
        # a signature's verdict: the draft's version and head it holds for, and what a later
        # turn of the signature is given: the list of its reason's skipped turns (recorded
        # together by ``wait_behind``), or the reason itself when it needs more than the Want's
        # minimum (larger than the cluster: its request's minimum), recorded on its own
        seen: dict[Signature, tuple[int, str | None, list[Want] | PendingReason]] = {}
        same: dict[tuple[Reason, str, int], list[Want]] = {}  # skipped turns, by reason
        # behind a strict head every job shares one verdict once no admission check before the
        # head's can hold one of them (no leaf waits, serving pools, quotas; none larger than
        # the cluster or with needs from ``free_from`` on): the rest of the queue is then one
        # signature, taken in bulk after its first turn (test_signature.py::
        # test_the_rest_behind_a_strict_head_taken_in_bulk_changes_no_decision)
        free_from = (self._admitted_from(order, jobs)
                     if self.plan.mode == "strict" and self.leaf is None and not lent
                     and not capped and tree is None else None)
        behind = False  # a job behind the strict head had its turn
        leaf, sign, skipped = self.leaf, self._signer(tree is not None, capped, lent, reserving), 0
        for i, x in enumerate(order):
            if behind and free_from is not None and i >= free_from and self.head is not None:
                rest = order[i:]
                self.skipped += len(rest)
                same.setdefault((Reason.PRIORITY, f"FIFO: behind {self.head}", d.free_count),
                                []).extend(rest)
                break
            job = jobs[x.job_id]
            if leaf is not None:
                leaf.release(job.request.job_id)
            sig = sign(job, x)
            version, head = d.version, self.head
            known = seen.get(sig)
            if known is not None and known[0] == version and known[1] == head:
                skipped += 1
                given = known[2]
                if isinstance(given, list):
                    given.append(x)
                else:  # held for its request's minimum, not the plan's (larger than the cluster)
                    d.wait(job, given.code, given.detail, given.needed)
                continue
            behind = behind or (head is not None and self.plan.mode == "strict")
            self._turn(job, x)
            jid = job.request.job_id
            waits = d.reason(jid) if jid not in d.started else None
            if waits is not None and d.version == version and self.head == head:
                seen[sig] = (version, head, same.setdefault((waits.code, waits.detail, waits.free), [])
                             if waits.needed == x.needed(job.request.replica_gpus) else waits)
        self.skipped += skipped
        for (code, detail, free), wants in same.items():
            if wants:
                d.wait_behind(wants, jobs, code, detail, free)
        return d.since(mark)

    def _admitted_from(self, order: list[Want], jobs: Mapping[str, Job]) -> int:
        """The first place in ``order`` from which no job is larger than the cluster or has
        needs (the admission checks left when there are no pools, quotas or leaf waits)."""
        total, last = self.d.total, -1
        for i, x in enumerate(order):
            job = jobs[x.job_id]
            if job.min_gpus > total or not job.needs.empty:
                last = i
        return last + 1

    def _signer(self, tree: bool, capped: Mapping[str, int], lent: bool,
                reserving: frozenset[str] | None) -> Callable[[Job, Want], Signature]:
        """Each turn's signature, from what the walk holds for the whole run: whether a quota
        tree reaches every account (``tree``) or a flat quota some (``capped``), whether nodes are
        lent by time (``lent``), who may hold the backfill reservation (``reserving``); and from
        what moves during it, read at each turn: the head and its shadow."""
        d, backfill, leaf = self.d, self.plan.mode == "backfill", self.leaf is not None

        def sign(job: Job, x: Want) -> Signature:
            r = job.request
            own = x.min_replicas < x.replicas or (bool(x.pools) and d.pools.mixed)
            ends_before = None
            if not own and backfill and self.head is not None:
                ends_before = d.now + _runtime(job, x.replicas) <= self.shadow_t
            return signature(job, x, r.account if tree or r.account in capped else None,
                             time_key(job, own, ends_before, lent), r.submit_time if leaf else None,
                             None if reserving is None else r.job_id in reserving)

        return sign

    def _turn(self, job: Job, x: Want) -> None:
        """One job's turn: admission, a start attempt, and the wait that follows a miss."""
        self.searched += 1
        need = x.needed(job.replica_gpus)
        verdict = self._verdict(job, x, need)
        if isinstance(verdict, Held):
            self.d.wait(job, verdict.code, verdict.detail, verdict.needed)
        elif verdict.started is not None:
            self._started(job, verdict.started)
        else:
            self._waits(job, x, verdict, need)

    def _verdict(self, job: Job, x: Want, need: int) -> Verdict:
        """The admission checks, in order, then a start attempt (the one search)."""
        d, tree = self.d, self.d.snap.quotas
        if job.min_gpus > d.total:
            return Held(Reason.LARGER_THAN_CLUSTER, f"cluster has {d.total} GPUs", job.min_gpus)
        # without serving pools a job with no needs may use any node (the hot spares held from
        # it are a wait, not a need unmet)
        unmet = "" if d.snap.serving is None and job.needs.empty else _needs_unmet(d, job)
        if unmet:
            return Held(Reason.NEEDS_UNMET, unmet, job.min_gpus)
        quota = d.snap.account_quotas.get(job.account)
        if quota is not None and d.account_gpus.get(job.account, 0) + need > quota:
            return Held(Reason.QUOTA, f"account {job.account} quota {quota} GPUs", need)
        block = None if tree is None else quotas.gate(tree, d.account_gpus, job.account, need,
                                                      waiting=d.waiting, free=d.free_count)
        if block is not None:  # a level of the quota tree binds (reclaim may free it)
            return Held(block.reason, block.detail, need)
        if self.head is not None and self.plan.mode == "strict":
            return Held(Reason.PRIORITY, f"FIFO: behind {self.head}", need)
        return _try_start(d, job, x, self._fits(job, quota), self.leaf)

    def _started(self, job: Job, st: Start) -> None:
        if self.head is not None and self.d.now + _runtime(job, st.replicas) > self.shadow_t:
            hn = self.head_nodes  # backfilled beside the reservation: uses spare GPUs
            self.extra -= st.gpus if hn is None else sum(
                len(g) for n, g in st.assignment.items() if n in hn)

    def _waits(self, job: Job, x: Want, attempt: Attempt, need: int) -> None:
        """The attempt missed: the job waits, for a leaf, for what no eviction cures, or for
        GPUs (after a start on a held leaf's GPUs, when one is lent)."""
        d = self.d
        if attempt.for_leaf:
            self._wait_for_leaf(job, x, need)
            return
        if attempt.failure is not None and attempt.failure.code.about_the_request:
            d.wait(job, attempt.reason, attempt.failure.detail, need)  # no eviction can help
            return
        quota = d.snap.account_quotas.get(job.account)
        if self.leaf is not None and self.leaf.lends and self.leaf.held and self._lend(job, x, quota):
            return
        self._missed(job, x, attempt.reason, need)
        held = self.leaf.hold(job, x.replicas * job.replica_gpus) if self.leaf else None
        if held is not None:  # waiting for GPUs, and keeping one leaf for them meanwhile
            d.annotate(job.job_id, f"holding leaf {held}")

    def _lend(self, job: Job, x: Want, quota: int | None) -> bool:
        """Start ``job`` on a held leaf's GPUs when it ends before that leaf's holder expects room
        there (``LeafWait.lend``); only a plain job at its wanted size that nothing else (quota,
        backfill reservation) keeps from starting now."""
        assert self.leaf is not None
        k = x.replicas
        if self.d.snap.serving is not None or not job.needs.empty:
            return False
        fit = self._fits(job, quota)(k)
        if not fit.ok or fit.avoid:
            return False
        placed = self.leaf.lend(job, k, _runtime(job, k))
        if placed is None:
            return False
        self.d.start(job, placed, k)
        return True

    def _wait_for_leaf(self, job: Job, x: Want, need: int) -> None:
        """The job placed only across leaves: it waits for one leaf (no eviction serves it; in
        ``strict`` mode it is the head that blocks the queue) and holds one if a hold is left."""
        d, leaf = self.d, self.leaf
        assert leaf is not None  # only LeafWait makes an attempt wait for a leaf
        d.block(job.priority_class)
        if self.head is None and self.plan.mode == "strict":
            self.head = job.job_id
        left = leaf.left_s(job)
        held = leaf.hold(job, x.replicas * job.replica_gpus)
        where = f"; holding leaf {held}" if held else ""
        d.wait(job, Reason.WAITING_FOR_LEAF,
               f"free GPUs only across leaves; waits up to {left:.0f}s more for one leaf{where}", need)

    def _fits(self, job: Job, quota: int | None) -> Callable[[int], Fit]:
        d, mode, head, shadow_t, extra = self.d, self.plan.mode, self.head, self.shadow_t, self.extra
        head_nodes = self.head_nodes
        room = INF if quota is None else quota - d.account_gpus.get(job.account, 0)
        room = min(room, quotas.room(d.snap.quotas, d.account_gpus, job.account, waiting=d.waiting))

        def fits(k: int) -> Fit:
            if k * job.replica_gpus > room:
                return NO_FIT  # a start above the minimum must respect the quota too
            if head is None or mode != "backfill":
                return FITS
            if d.now + _runtime(job, k) <= shadow_t or k * job.replica_gpus <= extra:
                return FITS
            if head_nodes is None:
                return NO_FIT
            # GPUs the reserved job cannot use never delay it: start there, or not at all
            off = sum(len(g) for n, g in d.free.items() if n not in head_nodes)
            return Fit(True, head_nodes) if off >= k * job.replica_gpus else NO_FIT

        return fits

    def _missed(self, job: Job, x: Want, why: Reason, need: int) -> None:
        d, plan = self.d, self.plan
        d.block(job.priority_class)
        may_reserve = plan.mode == "strict" or (
            plan.mode == "backfill" and (plan.reserve_for is None or job.job_id in plan.reserve_for))
        if self.head is None and may_reserve:
            self.head = job.job_id
            if plan.mode == "backfill":
                self.head_nodes = _head_nodes(d, job, x)
                if self.head_nodes is None:
                    self.shadow_t, self.extra = d.shadow(x.replicas * job.replica_gpus)
                else:  # only the GPUs meeting its needs (and in its pools) free up for it
                    self.shadow_t, self.extra = _shadow_on(d, self.head_nodes,
                                                           x.replicas * job.replica_gpus)
                d.reserve()
                d.wait(job, Reason.RESERVED, f"reserved start at t={self.shadow_t:.0f}", need)
                return
        elif self.head is not None and plan.mode == "backfill" and why is Reason.WAITING_FOR_GPUS:
            why = Reason.PRIORITY  # would delay the reserved head job
        detail = ("topology has no valid gang slot" if why is Reason.FRAGMENTED else
                  "the free GPUs that fit are on quarantined nodes" if why is Reason.QUARANTINED
                  else f"too few free GPUs on {job.needs.on()}"
                  if why is Reason.NO_ELIGIBLE_CAPACITY else "")
        d.wait(job, why, detail, need)


__all__ = ["PlacePhase"]
