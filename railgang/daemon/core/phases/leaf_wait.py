"""Bounded waiting for a leaf (``CycleConfig.leaf_wait_s``/``leaf_wait_max_s``/``leaf_holds``).

A gang placed across leaves runs its all-reduce over the spine for its whole life; waiting a
little for one leaf is usually cheaper. Two bounds, both from the job's submit time:

- up to ``wait_s`` the gang waits for one leaf whatever the cluster looks like;
- from ``wait_s`` up to ``max_s`` it keeps waiting only while some leaf that could hold it is
  expected to have room before ``max_s`` runs out (free GPUs plus the running jobs' expected
  ends: their time limits, or progress reports where the job sends them). A gang that needs a
  whole leaf, queued behind other gangs, outlives the first bound before any leaf drains; without
  the second it spreads over the partly busy leaves (issue 21: 18 of 25 whole-leaf gangs in one
  leaf on the real slurmctld at load 1.07). With whole-domain eviction, a gang that may evict
  counts the leaf it will evict for after ``domain_patience_s`` as expected room (that needs
  ``max_s`` above the patience: the place phase runs before the evict phase).

While it waits (for a leaf, or for GPUs at all) it holds the free GPUs of the leaf expected to
have room soonest (then: the most free GPUs, then fabric order), so the jobs after it in the
order do not refill that leaf; a gang that no leaf has room for now takes its hold before
anyone in its class is placed (``prehold``), so the jobs ahead of it cannot refill it either.
Holds are per cycle: the core keeps no state, the next cycle holds again (the same leaf
unless another is now expected sooner). Leaves come from the
fabric's ``leaf_of``; capacity counts usable nodes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.model.shadow import NO_ENDS, Ends
from railgang.daemon.core.phases.draft import INF, Draft
from railgang.topology.placement.types import GangRequest


class LeafWait:
    """One cycle's leaf waits and holds (see the module)."""

    def __init__(self, d: Draft, wait_s: float, holds: int, max_s: float = 0.0, *,
                 whole_leaf_first: bool = False, evict_after_s: float | None = None,
                 lend: bool = False) -> None:
        self.d, self.wait_s, self.holds = d, wait_s, holds
        self.whole_leaf_first = whole_leaf_first
        # whole-domain eviction: a gang that may evict does so for one leaf after this long
        # (domain_patience_s); None: no gang evicts for a leaf
        self.evict_after_s = evict_after_s
        self.lends = lend  # backfill into a held leaf (lend)
        self._until: dict[str, float] = {}  # held leaf -> when its holder expects room there
        self._kept_of: dict[str, dict[str, tuple[int, ...]]] = {}  # held leaf -> its held GPUs
        # shapes a held leaf could not take, with Draft.given then: GPUs given back since (a
        # shrink on the leaf) may let it take them
        self._no_lend: dict[tuple[str, GangRequest], int] = {}
        self.max_s = max(wait_s, max_s)
        self.held: list[str] = []
        self._early: dict[str, tuple[str, dict[str, tuple[int, ...]]]] = {}  # job -> leaf, GPUs
        self._cap: dict[str, int] | None = None
        self._ends: dict[str, Ends] | None = None
        self._node_gpus = 0
        self._kept: dict[str, tuple[int, ...]] = {}

    def _leaf(self, node: str) -> str:
        return str(self.d.snap.fabric.leaf_of(node))

    @property
    def cap(self) -> dict[str, int]:
        """GPUs of the usable nodes of each leaf."""
        if self._cap is None:
            fabric, cap = self.d.snap.fabric, dict[str, int]()
            for name, node in self.d.snap.nodes.items():
                if node.state.usable and name in fabric:
                    cap[self._leaf(name)] = cap.get(self._leaf(name), 0) + node.gpus
                    self._node_gpus = max(self._node_gpus, node.gpus)
            self._cap = cap
        return self._cap

    def applies(self, job: Job, gpus: int) -> bool:
        """``gpus`` of ``job`` must span nodes, one leaf could hold them, and a bound still
        applies (never on a fabric without leaves, e.g. a test's stand-in)."""
        age = self.d.now - job.submit_time
        if self.wait_s <= 0 or age >= self.max_s:
            return False
        if not hasattr(self.d.snap.fabric, "leaf_of"):
            return False
        cap = self.cap  # also finds the largest node
        if not self._node_gpus < gpus <= max(cap.values(), default=0):
            return False
        return (age < self.wait_s or self._evicts_in_time(job)
                or self.room_at(gpus)[0] <= job.submit_time + self.max_s)

    def _evicts_in_time(self, job: Job) -> bool:
        """Will ``job`` evict for a whole leaf (phases/evict_domain.py) before its second bound
        runs out? Then a leaf is expected by then whether or not one drains: without this, a gang
        of a class that may evict spread past the first bound, before its patience was up, on 9
        of 57 whole-leaf gangs of the tree benchmark (issue 21). Classes 0-2 may evict batch."""
        after = self.evict_after_s
        return after is not None and job.priority_class < 3 and after < self.max_s
    def left_s(self, job: Job) -> float:
        """Seconds the job may still wait for a leaf (the bound it is under)."""
        age = self.d.now - job.submit_time
        return (self.wait_s if age < self.wait_s else self.max_s) - age

    def spread(self, job: Job, gpus: int, placed: Placed) -> bool:
        """True if ``placed`` spans leaves while the job should wait for one leaf instead."""
        return self.applies(job, gpus) and len({self._leaf(n) for n in placed.assignment}) > 1

    def room_at(self, gpus: int) -> tuple[float, str | None]:
        """When the soonest leaf not yet held could have ``gpus`` free, and which (INF, None:
        none is expected to); ties: the most free GPUs now, then fabric order."""
        d, free = self.d, self._free()
        order = {leaf: i for i, leaf in enumerate(d.snap.fabric.leaves)}
        best: tuple[float, int, int, str] | None = None
        for leaf, c in self.cap.items():
            if c < gpus or leaf in self.held:
                continue
            t = self._leaf_ends().get(leaf, NO_ENDS).when(free.get(leaf, 0), gpus, d.now)[0]
            key = (t, -free.get(leaf, 0), order.get(leaf, 0), leaf)
            best = key if best is None or key < best else best
        return (INF, None) if best is None or best[0] == INF else (best[0], best[3])

    def hold(self, job: Job, gpus: int) -> str | None:
        """Hold the free GPUs of the leaf expected to have room for ``gpus`` soonest from the
        rest of this cycle; None if no hold is left or applies."""
        if len(self.held) >= self.holds or not self.applies(job, gpus):
            return None
        until, leaf = self.room_at(gpus)
        if self._evicts_in_time(job):  # its eviction may need the leaf's GPUs before it drains
            until = min(until, job.submit_time + (self.evict_after_s or 0.0))
        if leaf is None:  # no leaf expected to drain (no estimates): the one with most free GPUs
            until = self.d.now  # nothing is lent from it
            free, order = self._free(), {lf: i for i, lf in enumerate(self.d.snap.fabric.leaves)}
            cands = [(-free.get(lf, 0), order.get(lf, 0), lf) for lf, c in self.cap.items()
                     if c >= gpus and lf not in self.held]
            if not cands:
                return None
            leaf = min(cands)[2]
        self.held.append(leaf)
        d = self.d
        kept = {n: tuple(sorted(g)) for n, g in d.free.items()
                if n in d.snap.fabric and self._leaf(n) == leaf}
        d.hold(kept)
        self._kept = self._kept_of[leaf] = kept
        self._until[leaf] = until
        return leaf

    def lend(self, job: Job, replicas: int, runtime_s: float) -> Placed | None:
        """Backfill into a held leaf (``CycleConfig.backfill_held_leaf``): place ``job`` on the
        held GPUs of a leaf whose holder expects room there no sooner than ``job`` is expected
        to end, so that the hold costs the holder nothing and the smaller jobs less (EASY
        backfill, per leaf; issue 21: long holds for whole-leaf gangs idled GPUs that small jobs
        waited for). The GPUs it takes are no longer held; None: no held leaf takes it."""
        d = self.d
        for leaf in self.held:
            kept = self._kept_of.get(leaf)
            if not kept or d.now + runtime_s > self._until.get(leaf, d.now):
                continue
            gang = gang_for(job, replicas, frozenset(kept))
            if gang.gpus > sum(map(len, kept.values())) or self._no_lend.get((leaf, gang)) == d.given:
                continue
            pool = {n: d.free.get(n, frozenset()) | frozenset(g) for n, g in kept.items()}
            placed = d.place(gang, pool)
            if not isinstance(placed, Placed):
                self._no_lend[(leaf, gang)] = d.given
                continue
            lent = {n: tuple(g for g in gs if g in kept.get(n, ())) for n, gs in placed.assignment.items()}
            d.unhold({n: g for n, g in lent.items() if g})
            for n, g in lent.items():
                if n in kept:  # in place: prehold's record of the leaf gives back only the rest
                    kept[n] = tuple(x for x in kept[n] if x not in g)
            return placed
        return None

    def prehold(self, order: Sequence[Want], jobs: Mapping[str, Job]) -> None:
        """Before anyone in ``order`` is placed, hold leaves for the first gangs that no leaf has
        room for now (count of free GPUs), so the jobs before them in the order do not take the
        GPUs a draining leaf frees either; each gives its leaf back at its own turn
        (:meth:`release`) and holds again if it still waits. With ``whole_leaf_first`` a gang
        that needs a whole leaf holds one even when a leaf has room now: the smaller jobs ahead
        of it may start anywhere else, but a wholly free leaf is the only place it can go."""
        most = max(self._free().values(), default=0)
        whole = max(self.cap.values(), default=0) if self.whole_leaf_first else 0
        for x in order:
            if len(self.held) >= self.holds:
                return
            job = jobs[x.job_id]
            gpus = x.replicas * job.replica_gpus
            if (gpus > most or 0 < whole <= gpus) and self.hold(job, gpus) is not None:
                self._early[job.job_id] = (self.held[-1], self._kept)

    def release(self, job_id: str) -> None:
        """Give back the leaf :meth:`prehold` kept for ``job_id``: its turn has come."""
        early = self._early.pop(job_id, None)
        if early is not None:
            self.held.remove(early[0])
            self._kept_of.pop(early[0], None)
            self.d.unhold(early[1])

    def _free(self) -> dict[str, int]:
        free: dict[str, int] = {}
        for n, g in self.d.free.items():
            if n in self.d.snap.fabric:
                free[self._leaf(n)] = free.get(self._leaf(n), 0) + len(g)
        return free

    def _leaf_ends(self) -> dict[str, Ends]:
        """Per leaf, the running jobs' expected ends and the GPUs each frees there (one pass
        per cycle, only when a gang outlives its first bound or holds a leaf)."""
        if self._ends is None:
            ends: dict[str, list[tuple[float, int]]] = {}
            fabric, now = self.d.snap.fabric, self.d.now
            for run in self.d.snap.running.values():
                per: dict[str, int] = {}
                for n, gs in run.assignment.items():
                    if n in fabric:
                        per[self._leaf(n)] = per.get(self._leaf(n), 0) + len(gs)
                end = run.expected_end(now)
                for leaf, count in per.items():
                    ends.setdefault(leaf, []).append((end, count))
            self._ends = {leaf: Ends.of(holders) for leaf, holders in ends.items()}
        return self._ends


__all__ = ["LeafWait"]
