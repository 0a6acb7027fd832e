"""Migration off degraded links (DESIGN R-T8): checkpoint, kill, re-place, restart — when it pays.

When the link health says a running gang's links lost bandwidth (a spine or leaf uplink
degraded, an HCA port trained down), the gang runs slower than its placement promised. The
cycle's migrate phase weighs, per such job:

- **measured loss**: the job's step-time factor on its current GPUs under the current link
  health, ``f_now = 1 / ((1 - c) + c × T(now, health) / T(now, healthy))``, with ``c`` the job's
  communication share (``comm_fraction``; ``MigrationRules.comm_fraction`` if unknown) and ``T``
  the modeled ring all-reduce (``topology.comm_model``) — 1.0 on healthy links;
- **re-place**: the best placement ``topology`` finds on the free GPUs plus the job's own, under
  the same health; its factor ``f_new`` (same formula and reference);
- **the payback rule**: with ``W`` seconds of work left at full speed, staying costs ``W / f_now``
  and moving ``W / f_new + C``, where ``C`` = checkpoint save + restore/warm-up + restart
  overhead (+ the work since the last periodic checkpoint when the job does not checkpoint on
  the signal). The job migrates when the gross saving ``W / f_now - W / f_new`` is at least
  ``margin × C``. R-T8's example: a 20 % loss (``f_now = 0.8``) and a 10-minute migration break
  even after ``C × f_new / (f_new - f_now)`` = 50 minutes; with ``margin`` 1.5 the job needs at
  least 60 minutes of work left to be moved (:func:`payback`).

Within the preemption budget (a migration is a preemption the job pays for itself): never
serving (class 0), a job at most once per ``job_min_interval_s``, the churn window's cap (except
that one job may move while the window has no churn at all: a gang larger than the cap could
otherwise never leave a degraded spine), and at most ``max_per_cycle`` jobs a cycle. Jobs are weighed in order of a cheap bound of what they
could gain (``W × c × (1 / worst link factor − 1)``; ties by job id), at most ``max_searches``
a cycle, so a spine failure that slows hundreds of gangs keeps the cycle bounded. The result is a :class:`~railgang.daemon.core.model.actions.Migrate`
whose target GPUs the cycle holds from later starts. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model.actions import Action, Migrate
from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import Assignment, RunningJob
from railgang.daemon.core.phases.draft import Draft

__all__ = ["MigrationRules", "Payback", "migrate_phase", "move_cost_s", "payback", "step_factor"]

_NBYTES = 1 << 30  # all-reduce size for the time ratio (only the ratio matters)


@dataclass(frozen=True)
class MigrationRules:
    """When a degraded gang is moved (module docstring)."""

    enabled: bool = True
    min_loss: float = 0.1  # consider jobs that lost at least this share of their speed
    margin: float = 1.5  # gross saving must be at least margin × cost
    restart_s: float = 60.0  # requeue + launch on top of the job's checkpoint and restore costs
    checkpoint_on_signal: bool = True  # the job saves when signalled (else: loses work since the
    # last periodic checkpoint, which the cost then includes)
    comm_fraction: float = 0.2  # communication share of a multi-node job that states none
    max_per_cycle: int = 4
    max_searches: int = 8  # jobs weighed per cycle (model + placement search), most to gain first


@dataclass(frozen=True)
class Payback:
    """The payback rule's numbers for one job (seconds; factors relative to healthy links)."""

    f_now: float
    f_new: float
    remaining_now_s: float  # W / f_now: time left staying put
    remaining_new_s: float  # W / f_new: time left after moving, excluding the cost
    cost_s: float
    saving_s: float  # gross: remaining_now_s - remaining_new_s
    payback_s: float  # wall time after which moving is ahead (inf if it never is)
    migrate: bool


def payback(work_s: float, f_now: float, f_new: float, cost_s: float, margin: float) -> Payback:
    """Apply R-T8's rule to ``work_s`` seconds of full-speed work left."""
    now_s = work_s / f_now if f_now > 0 else float("inf")
    new_s = work_s / f_new if f_new > 0 else float("inf")
    saving = now_s - new_s
    back = cost_s * f_new / (f_new - f_now) if f_new > f_now else float("inf")
    return Payback(f_now, f_new, now_s, new_s, cost_s, saving, back,
                   f_new > f_now and saving >= margin * cost_s)


def _gpus(assignment: Assignment) -> list[tuple[str, int]]:
    return [(n, g) for n, gs in sorted(assignment.items()) for g in gs]


def step_factor(fabric: Any, health: Any, assignment: Assignment, reference: Assignment,
                comm: float) -> float:
    """Speed of a step on ``assignment`` under ``health`` relative to ``reference`` on healthy
    links: ``1 / ((1 - comm) + comm × T(assignment, health) / T(reference, healthy))``."""
    from railgang.topology.comm_model import ring_allreduce_time_s

    if comm <= 0 or (len(assignment) <= 1 and len(reference) <= 1):
        return 1.0
    ref = ring_allreduce_time_s(fabric, _gpus(reference), _NBYTES)
    if ref <= 0:
        return 1.0
    t = ring_allreduce_time_s(fabric, _gpus(assignment), _NBYTES, health=health)
    return 1.0 / ((1.0 - comm) + comm * t / ref)


def _worst(fabric: Any, health: Any, assignment: Assignment) -> float:
    """Cheap bound: the lowest factor on any link the job's all-reduce crosses (1.0: none)."""
    nodes = sorted(assignment)
    if len(nodes) <= 1:
        return 1.0
    hca = getattr(health, "hca", {}) or {}
    worst = min((f for (n, _r), f in hca.items() if n in assignment), default=1.0)
    bad = {s: f for s, f in (getattr(health, "switches", {}) or {}).items() if f < 1.0}
    if bad:
        leaves: dict[str, str] = {}
        for n in nodes:
            leaves.setdefault(fabric.leaf_of(n), n)
        reps = list(leaves.values())
        crossed = {fabric.leaf_of(reps[0])} if len(reps) == 1 else {
            sw for i, a in enumerate(reps) for b in reps[i + 1:] for sw in fabric.path_switches(a, b)}
        worst = min([worst, *(f for sw, f in bad.items() if sw in crossed)])
    return worst


def move_cost_s(run: RunningJob, rules: MigrationRules, now: float) -> float:
    """Seconds one move costs ``run`` (the payback rule's ``C``): checkpoint save + restore +
    restart, + the work since its last periodic checkpoint when it does not save on the signal."""
    lost = 0.0 if rules.checkpoint_on_signal else run.work_since_checkpoint_s(now)
    return run.job.checkpoint_cost_s + run.job.restore_cost_s + rules.restart_s + lost


def _work_left(run: RunningJob, now: float) -> float | None:
    left = run.remaining_at(now)  # full speed on its size
    if left is None and run.job.time_limit_s is not None:
        left = max(0.0, run.start_time + run.job.time_limit_s - now)
    return left


def migrate_phase(d: Draft, rules: MigrationRules, budget: pre.PreemptionBudget) -> tuple[Action, ...]:
    """Move running gangs off degraded links when the payback rule says so; returns the moves."""
    mark = d.mark()
    _migrate(d, rules, budget)
    return d.since(mark)


def _migrate(d: Draft, rules: MigrationRules, budget: pre.PreemptionBudget) -> None:
    """Emit ``Migrate`` for the degraded running gangs the payback rule moves (module docstring)."""
    snap, now = d.snap, d.now
    health, fabric = snap.health, snap.fabric
    if not rules.enabled or health is None or not hasattr(fabric, "path_switches"):
        return
    if not any(f < 1.0 for f in (getattr(health, "switches", {}) or {}).values()) and not any(
            f < 1.0 for f in (getattr(health, "hca", {}) or {}).values()):
        return  # healthy links: nothing to weigh
    churn = pre.churned_gpus(snap, now, budget.churn_window_s) + sum(
        getattr(a, "gpus", 0) for a in d.moves)
    cap = pre.churn_cap_gpus(snap, budget)
    # 1. who may have lost speed, within the per-job budget, ranked by a cheap bound of what
    # moving could gain (work x comm x (1/worst link factor - 1)); the all-reduce model runs only
    # for the first max_searches (a spine failure may slow hundreds of gangs at once)
    cands: list[tuple[float, str, RunningJob, float, float]] = []
    for run in snap.running.values():
        if run.preempt_deadline is not None or run.job_id in d.touched or run.priority_class == 0:
            continue
        worst = _worst(fabric, health, run.assignment)
        work = _work_left(run, now)
        if worst >= 1.0 or work is None:
            continue
        if pre.recently_preempted(run.job.last_preempted_at, now, budget.job_min_interval_s):
            continue
        comm = run.job.comm_fraction or rules.comm_fraction
        bound = work * comm * (1.0 / max(worst, 1e-3) - 1.0)
        cands.append((-bound, run.job_id, run, comm, work))
    # 2. the payback rule with the modeled factors, and a placement search, best bound first
    moved = 0
    for _key, _jid, run, comm, work in sorted(cands, key=lambda c: c[:2])[:rules.max_searches]:
        if moved >= rules.max_per_cycle:
            break
        if churn > 0 and churn + run.gpus > cap:
            continue  # an empty window lets one job move: a gang above the cap could never leave
        f_now = step_factor(fabric, health, run.assignment, run.assignment, comm)
        if f_now > 1.0 - rules.min_loss:
            continue
        free: dict[str, frozenset[int]] = dict(d.free)
        for n, gs in run.assignment.items():
            free[n] = free.get(n, frozenset()) | frozenset(gs)
        placed = d.place(gang_for(run.job, run.replicas), free)
        if not isinstance(placed, Placed):
            continue
        f_new = step_factor(fabric, health, placed.assignment, run.assignment, comm)
        cost = move_cost_s(run, rules, now)
        verdict = payback(work, f_now, f_new, cost, rules.margin)
        if not verdict.migrate:
            continue
        target: Mapping[str, tuple[int, ...]] = placed.assignment
        d.migrate(Migrate(run.job_id, pre.grace_for(run, budget), target, run.replicas,
                          round(verdict.saving_s, 1), round(cost, 1), run.gpus),
                  taking={n: tuple(g for g in gs if g not in run.assignment.get(n, ()))
                          for n, gs in target.items()})
        churn += run.gpus
        moved += 1
