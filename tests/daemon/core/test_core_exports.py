"""The public surface of railgang.daemon.core is declared and pinned (STYLE 14)."""

from __future__ import annotations

import railgang.daemon.core as core

EXPECTED = {
    "Account", "Action", "Assignment", "CycleConfig", "Decision", "DefragRules", "DrainNode",
    "ElasticRules",
    "GangRequest", "Job", "JobRequest", "JobState", "Migrate", "MigrationRules", "Node", "NodeState", "PendingReason", "Placed",
    "PlacementFailure", "Placer", "Plan", "Policy", "Preempt", "PreemptEvent", "PreemptionBudget",
    "Reason", "Resize", "RunningJob", "SetPriority", "SpeedupFn", "Snapshot", "Start", "TagNode",
    "Unplaceable", "Want", "allreduce", "amdahl", "decide", "gang_for", "gpu_count", "linear",
    "make_snapshot", "reason_for", "table", "topology_placer",
    "GpuFacts", "Needs", "NeedsError", "needs", "parse_needs", "PriorityClass",
}


def test_exported_members_are_pinned() -> None:
    assert set(core.__all__) == EXPECTED


def test_every_export_exists() -> None:
    for name in core.__all__:
        assert getattr(core, name) is not None
