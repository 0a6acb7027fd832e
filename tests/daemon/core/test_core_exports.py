"""The public surface of railgang.daemon.core is declared and pinned (STYLE 14)."""

from __future__ import annotations

import railgang.daemon.core as core

EXPECTED = {
    "Account", "Action", "CycleConfig", "Decision", "DrainNode", "ElasticRules", "GangSpec", "Job",
    "Node", "NotPlaced", "PendingReason", "Placed", "Placer", "Plan", "Policy", "Preempt",
    "PreemptEvent", "PreemptionBudget", "Reason", "Resize", "RunningJob", "SetPriority",
    "SpeedupFn", "Snapshot", "Start", "TagNode", "Want", "allreduce", "amdahl", "decide", "linear",
    "make_snapshot", "table", "topology_placer",
}


def test_exported_members_are_pinned() -> None:
    assert set(core.__all__) == EXPECTED


def test_every_export_exists() -> None:
    for name in core.__all__:
        assert getattr(core, name) is not None
