"""Who may evict whom, what a budget allows, and in which order victims are taken (R-S7, R-S8).

Priority classes (DESIGN R-S7): 0 serving is never preempted; 1 production is preempted only by
serving; 2 interactive by classes 0-1; 3 batch by anything above it. A policy may additionally
allow eviction *inside* a class (``Plan.preempt_within_class``) when the victim's level is strictly
worse than the waiting job's (Tiresias: a higher attained-service queue).

Budgets (:class:`PreemptionBudget`): a job is preempted at most once per ``job_min_interval_s``;
at most ``churn_cap`` × capacity GPUs are preempted per ``churn_window_s`` (serving, class 0,
is exempt from the cluster cap, never from the per-job interval); a job that was itself evicted
less than ``cascade_window_s`` ago may not evict anybody (cascade damping); one cycle frees room
for at most ``max_evictions_per_cycle`` waiting jobs (storm damping: the next cycle sees the
result of this one before it evicts more); a gang that needs a whole leaf or NVLink block evicts
for one only after it has waited ``domain_patience_s`` (most such gangs get a leaf by itself
within minutes, and each eviction costs the victims their work since the last checkpoint; on 16
NVL72 racks, evicting at once cost 4-10x the GPU-hours of Slurm's placement; issue 21); with
``churn_burst_gpus`` above the cap, one burst that large may be preempted at once and the window
stretches to keep the long-run rate (:func:`churn_allowance`). Shrinking an elastic
job to its minimum is always tried before preempting anything and does not count as churn.
Once the window's churn is spent and nothing running could shrink, every waiting job that
may evict somebody and that more GPUs would help waits for ``preemption_budget`` this cycle,
whether or not a victim holds GPUs on the nodes it may use: no search is run for it, and the
budget is the rule that stops it now (``phases/evict.py``, ``EvictPhase._may_find_victims``).

Victim order, one documented key (STYLE 5): 1. lowest class first (3 before 2), 2. worst level
first, 3. least work lost (GPU-seconds since the last checkpoint), 4. most recently started,
5. job id. Whole-job evictions are then taken **node by node** (``victims.solve``): for each
node, the victims in that order whose GPUs there, with the node's free ones, make the gang's
need (at most a node); the node whose worst needed victim ranks best goes first (then fewest
GPUs killed, then node name). A gang needs GPUs on few nodes, so victims scattered over many
nodes free nothing it can use (on Philly, 8-GPU jobs behind 1-GPU jobs spent the churn budget
that way and waited ~10 h; issue 12 part 5).
"""

from __future__ import annotations

from dataclasses import dataclass

from railgang.daemon.core.model.job import RunningJob
from railgang.daemon.core.model.snapshot import Snapshot


@dataclass(frozen=True)
class PreemptionBudget:
    job_min_interval_s: float = 3600.0  # a job is preempted at most once per hour
    churn_window_s: float = 600.0  # the cluster churn window (10 minutes)
    churn_cap: float = 0.05  # share of capacity that may be preempted per window
    cascade_window_s: float = 1800.0  # an evicted job may not evict others for this long
    grace_s: float = 120.0  # minimum signal-to-kill time (raised to the victim's checkpoint cost)
    max_evictions_per_cycle: int = 32  # storm damping: at most this many jobs freed per cycle
    # a gang that needs a whole leaf/NVLink block (phases/evict_domain.py) evicts for one only
    # after waiting this long (0: at once); until then it waits for a leaf to free by itself
    domain_patience_s: float = 0.0
    # GPUs that may be preempted at once when above the churn cap (0: the cap): one whole leaf
    # where a leaf is larger than the cap; the window stretches to keep the cap's long-run rate
    # (churn_allowance)
    churn_burst_gpus: int = 0


def class_may_preempt(requester: int, victim: int) -> bool:
    """DESIGN R-S7 as a predicate on priority classes."""
    if victim == 0:
        return False
    if victim == 1:
        return requester == 0
    return requester < victim


def churned_gpus(snapshot: Snapshot, now: float, window_s: float) -> int:
    """GPUs preempted inside the trailing window (from the snapshot's preemption history)."""
    return sum(e.gpus for e in snapshot.preemptions if now - e.time < window_s)


def churn_cap_gpus(snapshot: Snapshot, budget: PreemptionBudget) -> int:
    return int(budget.churn_cap * snapshot.total_gpus)


def churn_allowance(snapshot: Snapshot, budget: PreemptionBudget, now: float) -> tuple[int, int]:
    """(GPUs churned, GPUs allowed) under the churn budget and its burst.

    The cap is ``churn_cap`` x capacity GPUs per ``churn_window_s``. A burst above it
    (``churn_burst_gpus``, e.g. one whole leaf) allows that many GPUs per a window stretched by
    ``burst / cap``: the long-run rate is the cap's, one whole leaf may be cleared at once, and
    nothing more is preempted until the stretched window has paid it back (a sliding-window token
    bucket). Without it a leaf larger than the cap (64 GPUs against 51 on the 64 x 8-GPU tree at
    10 %) can be cleared by eviction only where part of it is free already (issue 21). A burst at
    or below the cap, or a cap of 0, leaves the budget as it is. The snapshot's preemption
    history must reach back over the stretched window (the simulator keeps an hour).
    """
    cap, burst = churn_cap_gpus(snapshot, budget), budget.churn_burst_gpus
    if cap <= 0 or burst <= cap:
        return churned_gpus(snapshot, now, budget.churn_window_s), cap
    return churned_gpus(snapshot, now, budget.churn_window_s * burst / cap), burst


def recently_preempted(last: float | None, now: float, window_s: float) -> bool:
    return last is not None and now - last < window_s


def victim_key(run: RunningJob, level: float, now: float) -> tuple[float, float, float, float, str]:
    lost = run.work_since_checkpoint_s(now) * run.gpus
    return (-run.priority_class, -level, lost, -run.start_time, run.job_id)


def grace_for(run: RunningJob, budget: PreemptionBudget) -> float:
    """Signal, then kill after enough time for a panic checkpoint."""
    return max(budget.grace_s, run.job.checkpoint_cost_s)


__all__ = [
    "PreemptionBudget",
    "churn_allowance",
    "churn_cap_gpus",
    "churned_gpus",
    "class_may_preempt",
    "grace_for",
    "recently_preempted",
    "victim_key",
]
