"""The pure decision core: snapshot in, actions and reasons out (no I/O, no Slurm, no DB).

Public API::

    from railgang.daemon.core import decide, Decision, CycleConfig, Snapshot, make_snapshot, Job, ...
    decision = decide(snapshot, policies.get("default"), now, random.Random(0))

Imports only the standard library, numpy and ``topology`` (a test enforces the boundary).
"""

from railgang.daemon.core.cycle import CycleConfig, Decision, decide
from railgang.daemon.core.model import needs
from railgang.daemon.core.model.actions import (
    Action,
    DrainNode,
    Migrate,
    Preempt,
    Resize,
    SetPriority,
    Start,
    TagNode,
)
from railgang.daemon.core.model.elastic import ElasticRules
from railgang.daemon.core.model.gang import (
    GangRequest,
    Placed,
    Placer,
    Unplaceable,
    gang_for,
    topology_placer,
)
from railgang.daemon.core.model.job import (
    Assignment,
    Job,
    JobRequest,
    JobState,
    PriorityClass,
    RunningJob,
    gpu_count,
)
from railgang.daemon.core.model.needs import GpuFacts, Needs, NeedsError, parse_needs
from railgang.daemon.core.model.plan import Plan, Policy, Want
from railgang.daemon.core.model.preemption import PreemptionBudget
from railgang.daemon.core.model.reasons import PendingReason, Reason, reason_for
from railgang.daemon.core.model.scaling import SpeedupFn, allreduce, amdahl, linear, table
from railgang.daemon.core.model.snapshot import (
    Account,
    Node,
    NodeState,
    PreemptEvent,
    Snapshot,
    make_snapshot,
)
from railgang.daemon.core.phases.defrag import DefragRules
from railgang.daemon.core.phases.migrate import MigrationRules
from railgang.topology.placement.types import PlacementFailure

__all__ = [
    "Account",
    "Action",
    "Assignment",
    "CycleConfig",
    "Decision",
    "DefragRules",
    "DrainNode",
    "ElasticRules",
    "GangRequest",
    "GpuFacts",
    "Job",
    "JobRequest",
    "JobState",
    "Migrate",
    "MigrationRules",
    "Needs",
    "NeedsError",
    "Node",
    "NodeState",
    "PendingReason",
    "Placed",
    "PlacementFailure",
    "Placer",
    "Plan",
    "Policy",
    "Preempt",
    "PreemptEvent",
    "PreemptionBudget",
    "PriorityClass",
    "Reason",
    "Resize",
    "RunningJob",
    "SetPriority",
    "Snapshot",
    "SpeedupFn",
    "Start",
    "TagNode",
    "Unplaceable",
    "Want",
    "allreduce",
    "amdahl",
    "decide",
    "gang_for",
    "gpu_count",
    "linear",
    "make_snapshot",
    "needs",
    "parse_needs",
    "reason_for",
    "table",
    "topology_placer",
]
