"""The pure decision core: snapshot in, actions and reasons out (no I/O, no Slurm, no DB).

Public API::

    from daemon.core import decide, Decision, CycleConfig, Snapshot, make_snapshot, Job, ...
    decision = decide(snapshot, policies.get("default"), now, random.Random(0))

Imports only the standard library, numpy and ``topology`` (a test enforces the boundary).
"""

from daemon.core.actions import Action, DrainNode, Preempt, Resize, SetPriority, Start, TagNode
from daemon.core.cycle import CycleConfig, Decision, decide
from daemon.core.elastic import ElasticRules
from daemon.core.gang import GangSpec, NotPlaced, Placed, Placer, topology_placer
from daemon.core.job import Job, RunningJob, SpeedupFn, allreduce, amdahl, linear, table
from daemon.core.policy import Plan, Policy, Want
from daemon.core.preemption import PreemptionBudget
from daemon.core.reasons import PendingReason, Reason
from daemon.core.snapshot import Account, Node, PreemptEvent, Snapshot, make_snapshot

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
