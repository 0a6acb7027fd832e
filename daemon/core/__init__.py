"""The pure decision core: snapshot in, actions and reasons out (no I/O, no Slurm, no DB).

Public API::

    from railgang.daemon.core import decide, Decision, CycleConfig, Snapshot, make_snapshot, Job, ...
    decision = decide(snapshot, policies.get("default"), now, random.Random(0))

Imports only the standard library, numpy and ``topology`` (a test enforces the boundary).
"""

from railgang.daemon.core.actions import (
    Action,
    DrainNode,
    Preempt,
    Resize,
    SetPriority,
    Start,
    TagNode,
)
from railgang.daemon.core.cycle import CycleConfig, Decision, decide
from railgang.daemon.core.elastic import ElasticRules
from railgang.daemon.core.gang import GangSpec, NotPlaced, Placed, Placer, topology_placer
from railgang.daemon.core.job import Job, RunningJob, SpeedupFn, allreduce, amdahl, linear, table
from railgang.daemon.core.policy import Plan, Policy, Want
from railgang.daemon.core.preemption import PreemptionBudget
from railgang.daemon.core.reasons import PendingReason, Reason
from railgang.daemon.core.snapshot import Account, Node, PreemptEvent, Snapshot, make_snapshot

__all__ = [
    "Account",
    "Action",
    "CycleConfig",
    "Decision",
    "DrainNode",
    "ElasticRules",
    "GangSpec",
    "Job",
    "Node",
    "NotPlaced",
    "PendingReason",
    "Placed",
    "Placer",
    "Plan",
    "Policy",
    "Preempt",
    "PreemptEvent",
    "PreemptionBudget",
    "Reason",
    "Resize",
    "RunningJob",
    "SetPriority",
    "Snapshot",
    "SpeedupFn",
    "Start",
    "TagNode",
    "Want",
    "allreduce",
    "amdahl",
    "decide",
    "linear",
    "make_snapshot",
    "table",
    "topology_placer",
]
