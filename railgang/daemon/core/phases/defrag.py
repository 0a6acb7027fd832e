"""Defragmentation (issue 21 item 4): move small jobs out of a nearly free leaf so a gang fits.

One small job left in an NVLink block (or a leaf) makes the whole block unusable for every queued
gang that must sit inside one. The defrag phase runs after the preempt phase and looks at the
first waiting multi-node gang (in the cycle's order) that one leaf could hold but that neither a
placement nor an eviction served this cycle. For each leaf that could hold it:

1. **movers**: the running jobs inside that leaf only (a job spanning leaves stays), not serving,
   not signalled or touched this cycle, and not preempted or moved within
   ``PreemptionBudget.job_min_interval_s`` (a job is never moved twice in a window), taken
   cheapest move first (``migrate.move_cost_s`` × GPUs, then job id) until the leaf's free GPUs
   cover the gang, at most ``DefragRules.max_movers``;
2. **targets**: each mover is placed (the real placer, its whole gang) on free GPUs of *other*
   leaves that are already partly used — the fragmented ones, so no whole free leaf is broken
   up — with the GPUs taken by earlier movers removed, on no more nodes than it runs on now;
3. **the payback rule** (``migrate.payback``'s margin): without moves the gang waits until the
   first leaf that could hold it has room by its jobs' expected ends (remaining time, time limit
   if unknown, else ``DefragRules.unknown_wait_s``; the soonest over all leaves, not only this
   one); it gains ``gang GPUs × that wait``; the moves cost ``Σ mover GPUs × move_cost_s``. The
   leaf is defragmented when the gain is at least ``MigrationRules.margin`` × the cost;
4. **budget**: the movers' GPUs count as churn against the window's cap (as migrations do).

The cheapest leaf that passes is chosen (cost, then leaf order); its movers get
:class:`~railgang.daemon.core.model.actions.Migrate` actions, its free GPUs are held from the
rest of the cycle and the gang waits ``PREEMPTING`` for the leaf. At most one gang a cycle: the
next cycle sees the moves first. Off by default (``CycleConfig.defrag``): pinned schedules stay.
Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model import victims
from railgang.daemon.core.model.actions import Action, Migrate
from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.model.shadow import Ends
from railgang.daemon.core.phases.draft import Draft
from railgang.daemon.core.phases.evict_domain import domain_gang, leaves
from railgang.daemon.core.phases.migrate import MigrationRules, move_cost_s

__all__ = ["DefragRules", "defrag_phase"]

# reasons of gangs a consolidated leaf would serve (PREEMPTING: an eviction already serves it)
_WAITS = (Reason.WAITING_FOR_GPUS, Reason.FRAGMENTED, Reason.WAITING_FOR_LEAF, Reason.PREEMPTION_BUDGET)


@dataclass(frozen=True)
class DefragRules:
    """When a leaf is consolidated for a waiting gang (module docstring)."""

    enabled: bool = False
    max_movers: int = 4  # jobs moved out of one leaf at most
    unknown_wait_s: float = 3600.0  # a mover's remaining time when neither work nor limit is known


@dataclass(frozen=True)
class _Plan:
    cost_gpu_s: float
    gain_gpu_s: float
    leaf: str
    moves: tuple[tuple[RunningJob, Placed], ...]

    @property
    def assignment(self) -> Mapping[str, tuple[int, ...]]:
        """Where the movers go (the solver's view of a placement)."""
        return {n: gs for _, p in self.moves for n, gs in p.assignment.items()}


def _left_s(run: RunningJob, now: float, rules: DefragRules) -> float:
    left = run.remaining_at(now)
    if left is None and run.job.time_limit_s is not None:
        left = max(0.0, run.start_time + run.job.time_limit_s - now)
    return rules.unknown_wait_s if left is None else left


def defrag_phase(d: Draft, rules: DefragRules, moving: MigrationRules, budget: pre.PreemptionBudget,
                 order: Sequence[str]) -> tuple[Action, ...]:
    """Consolidate one leaf for the first waiting gang in ``order`` when it pays; returns the moves."""
    mark = d.mark()
    fabric = d.snap.fabric
    if rules.enabled and hasattr(fabric, "leaves"):
        jobs = {j.job_id: j for j in d.snap.pending}
        for jid in order:
            if jid in jobs and d.waits_for(jid) in _WAITS and _serve(d, jobs[jid], rules, moving, budget):
                break
    return d.since(mark)


def _serve(d: Draft, job: Job, rules: DefragRules, moving: MigrationRules, budget: pre.PreemptionBudget) -> bool:
    """Defragment one leaf for ``job`` if one passes (module docstring); True if it did."""
    fabric, snap, now = d.snap.fabric, d.snap, d.now
    need = job.min_replicas * job.replica_gpus
    if not domain_gang(fabric, need):
        return False
    room = pre.churn_cap_gpus(snap, budget) - pre.churned_gpus(snap, now, budget.churn_window_s) - sum(
        getattr(a, "gpus", 0) for a in d.moves)
    leaf_of = {n: fabric.leaf_of(n) for n in fabric.nodes}
    busy = {leaf_of[n] for r in snap.running.values() for n in r.assignment}
    wait = _natural_wait_s(d, need, leaf_of, rules)

    def fits(movers: Sequence[RunningJob], free: object, nodes: frozenset[str] | None) -> _Plan | None:
        leaf = leaf_of[next(iter(nodes))] if nodes else ""
        return _targets(d, leaf, movers, leaf_of, busy, moving, need * wait)

    places = leaves(d, None)
    if need > max((p.gpus for p in places), default=0):
        return False  # no leaf holds it: consolidating one would not serve it
    found = victims.solve(victims.Need(need, d.free, fits, places, one_place=True),
                          list(snap.running.values()), _rules(d, rules, moving, budget, room, leaf_of, len(places)))
    best = found.placed
    if best is None:
        return False
    grace = dict(zip((r.job_id for r in found.kills), found.graces, strict=True))
    for run, placed in best.moves:
        saving = best.gain_gpu_s / max(len(best.moves), 1) / max(run.gpus, 1)
        d.migrate(Migrate(run.job_id, grace[run.job_id], placed.assignment, run.replicas,
                          round(saving, 1), round(move_cost_s(run, moving, now), 1), run.gpus),
                  taking={n: tuple(g for g in gs if g not in run.assignment.get(n, ()))
                          for n, gs in placed.assignment.items()})
    d.hold({n: tuple(g) for n, g in d.free.items() if leaf_of.get(n) == best.leaf})
    names = ", ".join(r.job_id for r, _ in best.moves)
    d.wait(job, Reason.PREEMPTING, f"defragmenting leaf {best.leaf}: moving {names}", need)
    return True


def _natural_wait_s(d: Draft, need: int, leaf_of: Mapping[str, str], rules: DefragRules) -> float:
    """Seconds until some leaf has ``need`` GPUs by its running jobs' expected ends."""
    fabric, snap, now = d.snap.fabric, d.snap, d.now
    ends: dict[str, list[tuple[float, int]]] = {}
    for r in snap.running.values():
        for n, gs in r.assignment.items():
            if n in leaf_of:
                ends.setdefault(leaf_of[n], []).append((_left_s(r, now, rules), len(gs)))
    best = float("inf")
    for leaf in fabric.leaves:
        members = [n for n in fabric.direct_nodes(leaf) if n in snap.nodes and snap.nodes[n].state.usable]
        if sum(snap.nodes[n].gpus for n in members) < need:
            continue
        got = sum(len(d.free.get(n, ())) for n in members)
        best = min(best, Ends.of(ends.get(leaf, ())).when(got, need, 0.0)[0])  # (0: now)
    return best


def _rules(d: Draft, rules: DefragRules, moving: MigrationRules, budget: pre.PreemptionBudget, room: int,
           leaf_of: Mapping[str, str], n_leaves: int) -> victims.Rules:
    """Defragmentation's rules as the solver's input (module docstring): movers lie inside one
    leaf, are not serving, signalled, touched or moved within the interval; cheapest move first
    (GPUs × ``move_cost_s``, then job id), at most ``max_movers``, within the churn room; every
    leaf that could hold the gang is looked at (no trim, no widening: the payback decides)."""
    now = d.now

    def cost(r: RunningJob) -> float:
        return r.gpus * move_cost_s(r, moving, now)

    def movable(r: RunningJob) -> bool:
        return (r.priority_class != 0 and r.preempt_deadline is None and r.job_id not in d.touched
                and len({leaf_of.get(n) for n in r.assignment}) == 1)

    return victims.Rules(now, may_take=movable, min_interval_s=budget.job_min_interval_s, room=room,
                         grace=lambda r: pre.grace_for(r, budget),
                         cost=cost, price=lambda r, g, rank: (cost(r), r.job_id), widen=False,
                         tries=n_leaves, max_victims=rules.max_movers)


def _targets(d: Draft, leaf: str, movers: Sequence[RunningJob], leaf_of: Mapping[str, str], busy: set[str],
             moving: MigrationRules, gain: float) -> _Plan | None:
    """Where the movers go, cheapest move first (free GPUs of other, already partly used leaves:
    never a whole free leaf), and whether the moves pay back (``MigrationRules.margin``); None if not."""
    if not movers:
        return None
    room: dict[str, frozenset[int]] = {n: g for n, g in d.free.items() if leaf_of.get(n) != leaf
                                       and leaf_of.get(n) in busy}
    moves: list[tuple[RunningJob, Placed]] = []
    for r in sorted(movers, key=lambda r: (r.gpus * move_cost_s(r, moving, d.now), r.job_id)):  # cheapest first
        placed = d.place(gang_for(r.job, r.replicas, frozenset(room)), room)
        if not isinstance(placed, Placed) or len(placed.assignment) > len(r.assignment):
            return None  # no room, or only on more nodes than it runs on now (a worse placement)
        for n, gs in placed.assignment.items():
            room[n] = room[n] - frozenset(gs)
        moves.append((r, placed))
    cost = sum(r.gpus * move_cost_s(r, moving, d.now) for r in movers)
    if gain < moving.margin * cost:
        return None
    return _Plan(cost, gain, leaf, tuple(moves))
