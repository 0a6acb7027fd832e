"""The draft of one cycle's plan: the working copy of the free GPUs and what was decided so far.

One writer: the verbs below (``start``, ``shrink``, ``grow``, ``preempt``, ``migrate``, ``wait``,
and the bookkeeping ``hold``, ``block``, ``reserve``, ``annotate``) are the only way a phase
changes the plan; everything else a phase reads is a read-only view. Mutable on purpose and
private to a single ``decide`` call (it never escapes it): the snapshot stays immutable. Every
verb that emits an action appends it to one ordered log, so a phase returns what it did as
``draft.since(mark)``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence, Set
from operator import attrgetter

from railgang.daemon.core.model.actions import Action, Migrate, Preempt, Resize, Start
from railgang.daemon.core.model.gang import GangRequest, Placed, Placer, Unplaceable
from railgang.daemon.core.model.job import Assignment, Job, RunningJob, gpu_count
from railgang.daemon.core.model.needs import Needs, eligible_nodes
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.model.pools import PoolKey, Pools, pools_of, running_ends
from railgang.daemon.core.model.quota import pending_demand
from railgang.daemon.core.model.reasons import PendingReason, Reason
from railgang.daemon.core.model.room import Ask, Room
from railgang.daemon.core.model.shadow import Ends
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.model.spares import SpareRules, may_use_spares
from railgang.daemon.core.phases.waiting import Behind, BulkWaits, CycleReasons

INF = float("inf")
_JOB_ID, _WANT_ID = attrgetter("request.job_id"), attrgetter("job_id")  # the ids of waiting jobs and of wants


class Draft:
    """The plan of one ``decide`` call being drafted (never escapes it)."""

    def __init__(self, snap: Snapshot, now: float, placer: Placer, seed: int, *,
                 shrink_grace_s: float = 0.0) -> None:
        self.snap, self.now, self.placer, self.seed = snap, now, placer, seed
        self.shrink_grace_s = shrink_grace_s  # ElasticRules.shrink_grace_s: a shrink's notice
        self.total = snap.total_gpus
        self._free: dict[str, frozenset[int]] = {n: g for n, g in snap.free.items() if g}
        self._free_count = sum(len(g) for g in self._free.values())
        self._failed: dict[GangRequest, Unplaceable] = {}  # gang shapes that failed this cycle
        self.version = 0  # bumped whenever GPUs are taken or given back: a verdict found on
        # the free GPUs of one version holds for the same job until the next
        self.given = 0  # bumped whenever GPUs are given back: a placement missed on fewer free
        # GPUs may be found now (taking GPUs never turns a miss into a find)
        self._account_gpus = snap.account_running_gpus()
        # GPUs waiting jobs claim inside their own guarantee (borrowing may not take them)
        self._waiting = pending_demand(snap.quotas, snap.pending) if snap.quotas is not None else {}
        self._started: set[str] = set()
        self._touched: set[str] = set()  # running jobs shrunk, grown, preempted or moved
        self._reasons: dict[str, PendingReason] = {}
        self._behind = BulkWaits()  # waiting jobs recorded in bulk (``wait_behind``)
        self._overlap = False  # a job both started and waits: the counts no longer add up, and the
        # jobs without a reason are found by a walk of the queue
        self._bulk_codes: set[Reason] = set()  # the reasons they wait for
        self._starts: list[Start] = []
        self._shrinks: list[Resize] = []
        self._moves: list[Preempt | Migrate] = []  # preemptions and migrations, in order
        self._grows: list[Resize] = []
        self._log: list[Action] = []  # every action, in the order the verbs emitted them
        self._blocked: set[int] = set()  # classes with a job waiting for GPUs
        self._reserved = False
        self._started_ends: list[tuple[float, int]] = []  # (expected end, GPUs) of this cycle's starts
        self._sorted_ends: list[tuple[float, int]] | None = None  # all expected ends, sorted, built lazily
        self._ends: Ends | None = None  # over them (``ends``), until the next start
        self._eligible: dict[Needs, frozenset[str]] = {}  # nodes meeting each needs, per cycle
        self._serving_eligible: dict[tuple[object, ...], frozenset[str]] = {}  # likewise, with
        # serving pools: per (needs, deployment, lent nodes borrowable)
        self._spares: frozenset[str] = frozenset()  # hot spares this cycle (model/spares.py)
        self._spare_rules: SpareRules | None = None
        self._without_spares: dict[frozenset[str] | None, frozenset[str]] = {}
        self._pools: Pools | None = None  # GPU pools (type, tier) of the snapshot, built lazily
        self._pool_ends: dict[PoolKey, Ends] | None = None  # likewise
        # free CPUs and memory per node (model/room.py), less what this cycle's starts take;
        # nodes whose room is unknown are absent (not checked)
        self._room: dict[str, Room] = {n: node.room for n, node in snap.nodes.items()
                                       if node.room is not None}
        self._roomy: dict[tuple[Ask, int, frozenset[str] | None], frozenset[str]] = {}

    # -- read-only views ------------------------------------------------------------------------
    @property
    def free(self) -> Mapping[str, frozenset[int]]:
        """Free GPUs per node now (nodes without any are absent)."""
        return self._free

    @property
    def free_count(self) -> int:
        return self._free_count

    @property
    def account_gpus(self) -> Mapping[str, int]:
        """GPUs each account holds, counting this cycle's starts and grows."""
        return self._account_gpus

    @property
    def waiting(self) -> Mapping[str, int]:
        return self._waiting

    @property
    def started(self) -> Set[str]:
        return self._started

    @property
    def touched(self) -> Set[str]:
        """Running jobs this cycle already shrank, grew, preempted or moved."""
        return self._touched

    @property
    def starts(self) -> Sequence[Start]:
        return self._starts

    @property
    def moves(self) -> Sequence[Preempt | Migrate]:
        """Preemptions and migrations emitted so far (both count against the churn budget)."""
        return self._moves

    @property
    def blocked_classes(self) -> Set[int]:
        return self._blocked

    @property
    def reserved(self) -> bool:
        """A backfill reservation was made this cycle."""
        return self._reserved

    def reason(self, job_id: str) -> PendingReason | None:
        r = self._reasons.get(job_id)
        if r is None:
            behind = self._behind.get(job_id)
            if behind is not None:
                return behind.reason(job_id)
        return r

    def waits_for(self, job_id: str) -> Reason | None:
        """The code of :meth:`reason` (what the preempt phases ask of every waiting job), without
        building the reason of a job recorded in bulk."""
        r = self._reasons.get(job_id)
        if r is not None:
            return r.code
        behind = self._behind.get(job_id)
        return None if behind is None else behind.code

    def without_reason(self, pending: Sequence[Job]) -> Iterator[Job]:
        """The jobs of ``pending`` that neither started nor wait for a reason yet. The started,
        those with a reason and those recorded in bulk are disjoint subsets of ``pending`` (unless
        ``_overlap`` says otherwise), so when their counts add up to the queue none is left."""
        bulk = self._behind.count()
        if (bulk is not None and not self._overlap
                and len(self._reasons) + len(self._started) + bulk == len(pending)):
            return iter(())  # every one accounted for, each once (the maps are disjoint subsets)
        left = set(map(_JOB_ID, pending))
        left.difference_update(self._reasons, self._behind, self._started)
        return (j for j in pending if j.request.job_id in left) if left else iter(())

    @property
    def ends(self) -> Ends:
        """The expected ends of running jobs and of jobs started this cycle (``model/shadow.py``)."""
        if self._ends is None:
            if self._sorted_ends is None:
                running = [(r.expected_end(self.now), r.gpus) for r in self.snap.running.values()]
                self._sorted_ends = sorted(running + self._started_ends)
            self._ends = Ends(tuple(self._sorted_ends))
        return self._ends

    @property
    def pools(self) -> Pools:
        """The snapshot's GPU pools (``model.pools.pools_of``; one pool on a cluster without types)."""
        if self._pools is None:
            self._pools = pools_of(self.snap)
        return self._pools

    @property
    def pool_ends(self) -> Mapping[PoolKey, Ends]:
        """The expected ends of the running jobs per pool (``pools.running_ends``)."""
        if self._pool_ends is None:
            self._pool_ends = running_ends(self.snap, self.pools, self.now)
        return self._pool_ends

    # -- placement ------------------------------------------------------------------------------
    @property
    def spares(self) -> frozenset[str]:
        """This cycle's hot spares (model/spares.py); empty when the rule is off."""
        return self._spares

    def keep_spares(self, spares: frozenset[str], rules: SpareRules) -> None:
        """Hold ``spares`` this cycle for the jobs ``rules`` let use them (``model/spares.py``)."""
        self._spares, self._spare_rules = spares, rules

    def eligible(self, job: Job, room: bool = True) -> frozenset[str] | None:
        """Usable nodes meeting ``job``'s needs, and on a cluster with serving pools the ones
        its class may use there (``model/serving.py``), less the hot spares it may not use
        (``model/spares.py``), and (``room``) less those whose free CPUs or memory cannot hold
        the job beside its GPUs there (``model/room.py``); None: the job may use any node."""
        nodes = self._eligible_before_spares(job)
        if self._spares and self._spare_rules is not None and not may_use_spares(job, self._spare_rules):
            got = self._without_spares.get(nodes)
            if got is None:
                usable = frozenset(n for n, node in self.snap.nodes.items() if node.state.usable)
                got = self._without_spares[nodes] = (usable if nodes is None else nodes) - self._spares
            nodes = got
        if room and self._room and not job.needs.ask.empty:
            return self._with_room(job.needs.ask, job.request.max_gpus, nodes)
        return nodes

    def _with_room(self, ask: Ask, gpus: int, nodes: frozenset[str] | None) -> frozenset[str]:
        """``nodes`` (None: every usable one) whose room lets ``ask`` take as many GPUs as the
        placer may put there (all its free ones, up to the job's size): never more memory or
        CPUs than a node has free, whichever way the job is spread."""
        key = (ask, gpus, nodes)
        got = self._roomy.get(key)
        if got is None:
            names = (frozenset(n for n, node in self.snap.nodes.items() if node.state.usable)
                     if nodes is None else nodes)
            room, free = self._room, self._free
            got = self._roomy[key] = frozenset(
                n for n in names if n not in room
                or ask.gpus_on(room[n], min(gpus, len(free.get(n, ())))) >= min(gpus, len(free.get(n, ()))))
        return got

    def _eligible_before_spares(self, job: Job) -> frozenset[str] | None:
        nodes = self._by_needs(job)
        serving = self.snap.serving
        if serving is None:
            return nodes
        key = (job.needs, job.request.serving, serving.borrowable(job, self.now))
        got = self._serving_eligible.get(key)
        if got is None:
            usable = frozenset(n for n, node in self.snap.nodes.items() if node.state.usable)
            got = self._serving_eligible[key] = serving.allowed(
                job, usable if nodes is None else nodes, self.now)
        return got

    def _by_needs(self, job: Job) -> frozenset[str] | None:
        needs = job.needs
        if needs.empty:
            return None
        nodes = self._eligible.get(needs)
        if nodes is None:
            facts = {n: node.facts for n, node in self.snap.nodes.items() if node.state.usable}
            nodes = self._eligible[needs] = eligible_nodes(needs, facts)
        return nodes

    def place(self, gang: GangRequest,
              free: Mapping[str, frozenset[int]] | None = None) -> Placed | Unplaceable:
        """Place ``gang`` on this cycle's free GPUs (or on ``free``, a what-if); a shape that
        failed on the free GPUs fails again until some are given back, and its reason is the first
        search's (a search on fewer free GPUs might name another)."""
        if free is None:
            failed = self._failed.get(gang)
            if failed is not None:
                return failed
            res = self.placer(self.snap.fabric, self._free, gang, health=self.snap.health, seed=self.seed)
            if isinstance(res, Unplaceable):
                self._failed[gang] = res
            return res
        return self.placer(self.snap.fabric, free, gang, health=self.snap.health, seed=self.seed)

    def shadow(self, need: int) -> tuple[float, int]:
        """EASY shadow time: when ``need`` GPUs are free by running jobs' expected ends, and the
        GPUs spare at that time (count-based; topology is checked when the job actually starts)."""
        return self.ends.when(self._free_count, need, self.now)

    # -- the verbs: the only writers --------------------------------------------------------------
    def start(self, job: Job, placed: Placed, replicas: int) -> Start:
        """Start ``job`` on ``placed`` (it no longer waits)."""
        self._take(placed.assignment)
        ask = job.needs.ask
        for n, gs in placed.assignment.items():
            if n in self._room:
                self._room[n] = ask.after(self._room[n], len(gs))
        start = Start(job.job_id, placed.assignment, replicas, placed.cost)
        self._starts.append(start)
        self._log.append(start)
        self._started.add(job.job_id)
        self._reasons.pop(job.job_id, None)
        self._behind.pop(job.job_id)
        self._account_gpus[job.account] = self._account_gpus.get(job.account, 0) + replicas * job.replica_gpus
        left = job.remaining_at(replicas)
        end = (self.now + left if left is not None else INF, replicas * job.replica_gpus)
        self._started_ends.append(end)
        if self._sorted_ends is not None:
            bisect.insort(self._sorted_ends, end)
            self._ends = None
        return start

    def shrink(self, run: RunningJob, replicas: int, kept: Assignment, gone: Assignment, *,
               release_quota: bool = False) -> Resize:
        """Shrink ``run`` to ``replicas`` keeping ``kept``; ``gone`` is free for this cycle, unless
        the shrink comes with a notice (``shrink_grace_s``): then the job keeps them until the
        backend has really shrunk it, and they serve a later cycle. ``release_quota``: the
        account's count drops too (a reclaim frees quota for the job it serves; a plain eviction
        keeps counting the GPUs until the job has really shrunk)."""
        resize = Resize(run.job_id, replicas, kept, run.replicas, self.shrink_grace_s)
        self._shrinks.append(resize)
        self._log.append(resize)
        self._touched.add(run.job_id)
        if release_quota:
            self._account_gpus[run.job.account] -= gpu_count(gone)
        if self.shrink_grace_s <= 0:
            self._give(gone)
        return resize

    def grow(self, run: RunningJob, replicas: int, placed: Placed) -> Resize:
        """Grow ``run`` to ``replicas`` onto its GPUs plus ``placed``'s."""
        merged = {n: tuple(run.assignment.get(n, ())) + tuple(placed.assignment.get(n, ()))
                  for n in set(run.assignment) | set(placed.assignment)}
        self._take(placed.assignment)
        account = run.job.account
        self._account_gpus[account] = self._account_gpus.get(account, 0) + gpu_count(placed.assignment)
        resize = Resize(run.job_id, replicas, merged, run.replicas)
        self._grows.append(resize)
        self._log.append(resize)
        self._touched.add(run.job_id)
        return resize

    def preempt(self, action: Preempt) -> Preempt:
        """Signal a running job to checkpoint and requeue (its GPUs free up next cycle)."""
        self._moves.append(action)
        self._log.append(action)
        self._touched.add(action.job_id)
        return action

    def migrate(self, action: Migrate, taking: Assignment) -> Migrate:
        """Move a running job: ``taking`` (the free GPUs of its target) are held for it now."""
        self._take(taking)
        self._moves.append(action)
        self._log.append(action)
        self._touched.add(action.job_id)
        return action

    def wait(self, job: Job, code: Reason, detail: str, needed: int) -> None:
        """``job`` waits this cycle, for ``code`` (the last call for a job wins)."""
        self._reasons[job.job_id] = PendingReason(job.job_id, code, detail, needed, self._free_count)
        self._overlap = self._overlap or job.job_id in self._started
        if self._behind:
            self._behind.pop(job.job_id)

    def wait_behind(self, rest: Sequence[Want], jobs: Mapping[str, Job], code: Reason, detail: str,
                    free: int | None = None) -> None:
        """Every job of ``rest`` waits for ``code`` with ``detail``, each needing its ``Want``'s
        minimum, as :meth:`wait` would record one by one: recorded once, and each reason built
        only when read (the turns a signature skipped, ``model/signature.py``; in strict FIFO the
        whole queue behind the head).
        ``free``: the GPUs free when they were found to wait, if not now."""
        behind = Behind(dict(zip(map(_WANT_ID, rest), rest, strict=True)), jobs, code, detail,
                        self._free_count if free is None else free)
        self._bulk_codes.add(code)
        for jid in behind.wants.keys() & self._reasons.keys():  # the last call wins, as in wait
            del self._reasons[jid]
        self._overlap = self._overlap or not behind.wants.keys().isdisjoint(self._started)
        self._behind.add(behind)

    def annotate(self, job_id: str, detail: str) -> None:
        """Append ``detail`` to the reason ``job_id`` waits for."""
        r = self.reason(job_id)
        assert r is not None, job_id  # only a job that waits is annotated
        self._behind.pop(job_id)
        self._reasons[job_id] = r._replace(detail=f"{r.detail}; {detail}".lstrip("; "))

    def hold(self, assignment: Assignment) -> None:
        """Keep ``assignment``'s free GPUs from the rest of this cycle (a held leaf)."""
        self._take(assignment)

    def unhold(self, assignment: Assignment) -> None:
        """Give back GPUs :meth:`hold` kept (the job they were kept for has its turn)."""
        self._give(assignment)

    def block(self, priority_class: int) -> None:
        """A job of ``priority_class`` waits for GPUs (growing must not take them)."""
        self._blocked.add(priority_class)

    def reserve(self) -> None:
        """A backfill reservation was made (growing must not delay it)."""
        self._reserved = True

    # -- what was drafted ---------------------------------------------------------------------------
    def mark(self) -> int:
        return len(self._log)

    def since(self, mark: int) -> tuple[Action, ...]:
        """The actions emitted after ``mark``: what a phase did."""
        return tuple(self._log[mark:])

    def actions(self) -> tuple[Action, ...]:
        """Every action, in the order the backend applies them: shrinks free GPUs before
        preemptions and migrations signal, then starts, then grows."""
        return (*self._shrinks, *self._moves, *self._starts, *self._grows)

    def reasons(self, pending: Sequence[Job]) -> CycleReasons:
        """One reason per waiting job, in ``pending``'s order, each built when read (the last
        call: the draft changes nothing afterwards, the sequence reads its maps)."""
        return CycleReasons(pending, self._reasons, self._behind, frozenset(self._bulk_codes))

    # -- the free-GPU ledger (private: only the verbs move GPUs) ------------------------------------
    def _take(self, assignment: Assignment) -> None:
        for n, gs in assignment.items():
            left = self._free.get(n, frozenset()) - frozenset(gs)
            if left:
                self._free[n] = left
            else:
                self._free.pop(n, None)
            self._free_count -= len(gs)
        self._roomy.clear()
        self.version += 1

    def _give(self, assignment: Assignment) -> None:
        for n, gs in assignment.items():
            self._free[n] = self._free.get(n, frozenset()) | frozenset(gs)
            self._free_count += len(gs)
        self._roomy.clear()
        self.version += 1
        self.given += 1
        self._failed.clear()  # more free GPUs: earlier failures may now succeed


__all__ = ["INF", "Draft"]
