"""The upgrade phase: on a cluster of several GPU types, running jobs move onto a faster type's
GPUs that no waiting job took, when the time saved pays the move (Gavel's rounds move jobs for
free; here a move costs a checkpoint, a restore and a restart), and off spot GPUs that the spot
rules would now refuse them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model import tiers as spot
from railgang.daemon.core.model.actions import Action, Migrate
from railgang.daemon.core.model.gang import Placed, gang_for
from railgang.daemon.core.model.job import RunningJob
from railgang.daemon.core.model.plan import Plan
from railgang.daemon.core.model.pools import (
    RESTART_S,
    PoolKey,
    Pools,
    move_cost_s,
    pool_of_run,
    type_rate,
)
from railgang.daemon.core.phases.draft import Draft
from railgang.daemon.core.phases.pool_place import eligible_in


@dataclass(frozen=True)
class UpgradeRules:
    """When a running job moves to a faster pool whose GPUs nobody else took this cycle."""

    enabled: bool = True
    margin: float = 1.5  # time saved must be at least margin × the move's cost
    restart_s: float = RESTART_S  # requeue + launch, on top of the job's checkpoint and restore
    max_per_cycle: int = 4
    spot_rules: spot.SpotRules = dataclasses.field(default_factory=spot.SpotRules)  # onto spot


def upgrade_phase(d: Draft, plan: Plan, rules: UpgradeRules,
                  budget: pre.PreemptionBudget) -> tuple[Action, ...]:
    """Move running jobs onto faster idle GPUs when it pays (see ``_upgrade``); returns the moves."""
    mark = d.mark()
    _upgrade(d, plan, rules, budget)
    return d.since(mark)


def _upgrade(d: Draft, plan: Plan, rules: UpgradeRules, budget: pre.PreemptionBudget) -> None:
    """Emit ``Migrate`` for running jobs that finish sooner on a faster pool's idle GPUs.

    Runs after placement, so the free GPUs left are ones no waiting job would take. A job on pool
    Q moves to pool P when ``W/r_Q - (W/r_P + C) >= margin × C`` (W: work left in reference
    seconds, C: checkpoint + restore + restart + the work since its last checkpoint), largest
    saving first, within the preemption budget (class 0 never, a job at most once per interval,
    the churn window's cap). Before any upgrade, a job on spot that ``SpotRules`` would refuse on
    the nodes it holds (a gang scattered over more nodes than routing counted is reclaimed more
    often) moves to free non-spot GPUs of a type at least as fast (``_off_spot``)."""
    pools = d.pools
    if not rules.enabled or not plan.hetero or not pools.mixed or d.free_count <= 0:
        return
    snap, now = d.snap, d.now
    churn = pre.churned_gpus(snap, now, budget.churn_window_s) + sum(
        getattr(a, "gpus", 0) for a in d.moves)
    cap = pre.churn_cap_gpus(snap, budget)
    cands = _off_spot(d, pools, rules, budget, now)  # leaving spot first: it is a cost, not a gain
    for run in snap.running.values():
        key = pool_of_run(pools, run)
        left = run.remaining_at(now)
        if (key is None or left is None or run.preempt_deadline is not None or run.job_id in d.touched
                or run.priority_class == 0
                or pre.recently_preempted(run.job.last_preempted_at, now, budget.job_min_interval_s)):
            continue
        r_here = max(type_rate(run.job, key[0]), 1e-9)
        cost = (run.job.checkpoint_cost_s + run.job.restore_cost_s + rules.restart_s
                + run.work_since_checkpoint_s(now))
        for there in pools.nodes:
            r_there = type_rate(run.job, there[0])
            if there == key or r_there <= r_here:
                continue
            nodes = -(-run.gpus // max(1, pools.node_gpus[there]))
            if not rules.spot_rules.allows(run.job, there, nodes, snap.tiers):
                continue  # never onto spot that routing would refuse it
            saving = left / r_here - (left / r_there + cost)
            if saving >= rules.margin * cost:
                cands.append(((1.0, -saving), run.job_id, there, run))
    moved = 0
    for _, _, there, run in sorted(cands, key=lambda c: (c[0], c[1], c[2])):
        if moved >= rules.max_per_cycle:
            break
        if run.job_id in d.touched or (churn > 0 and churn + run.gpus > cap):
            continue
        placed = d.place(gang_for(run.job, run.replicas, eligible_in(d, run.job, pools.nodes[there])))
        if not isinstance(placed, Placed):
            continue
        d.migrate(Migrate(run.job_id, pre.grace_for(run, budget), placed.assignment,
                          run.replicas, gpus=run.gpus), taking=placed.assignment)
        churn += run.gpus
        moved += 1


def _off_spot(d: Draft, pools: Pools, rules: UpgradeRules, budget: pre.PreemptionBudget,
              now: float) -> list[tuple[tuple[float, ...], str, PoolKey, RunningJob]]:
    """Moves off spot (issue 13 part 3): a running job whose spot pool ``SpotRules`` would now
    refuse it, on the nodes it actually holds (a scattered gang is reclaimed once per node), goes
    to a non-spot pool of a type at least as fast, most predicted interruptions first."""
    snap = d.snap
    out: list[tuple[tuple[float, ...], str, PoolKey, RunningJob]] = []
    for run in snap.running.values():
        key = pool_of_run(pools, run)
        if (key is None or key[1] != spot.SPOT or run.preempt_deadline is not None
                or run.job_id in d.touched or run.priority_class == 0
                or pre.recently_preempted(run.job.last_preempted_at, now, budget.job_min_interval_s)):
            continue
        terms = snap.tiers.get(spot.SPOT)
        if terms is None or rules.spot_rules.allows(run.job, key, len(run.assignment), snap.tiers):
            continue
        left = run.remaining_at(now)
        if left is not None and left <= move_cost_s(run.job):
            continue  # ends before the move would pay for itself
        r_here = type_rate(run.job, key[0])
        per_day = spot.interruptions_per_day(run.job, len(run.assignment), terms)
        for there in pools.nodes:
            if there[1] != spot.SPOT and (there[0] == key[0] or type_rate(run.job, there[0]) >= r_here):
                # before any upgrade; most interruptions first; its own type before faster ones
                out.append(((0, -per_day, 0 if there[0] == key[0] else 1), run.job_id, there, run))
    return out


__all__ = ["UpgradeRules", "upgrade_phase"]
