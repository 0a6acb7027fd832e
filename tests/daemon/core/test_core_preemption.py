"""Priority classes, shrink-before-preempt, budgets, cascade damping, grace (R-S7, R-S8)."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core import (
    CycleConfig,
    Decision,
    Preempt,
    PreemptionBudget,
    Reason,
    Resize,
    Start,
    decide,
)
from railgang.daemon.core.model.preemption import class_may_preempt
from railgang.daemon.core.model.snapshot import PreemptEvent, Snapshot
from tests.daemon.core.core_builders import ClusterB, cluster, first_fit, job

H = 3600.0
NOW = 10 * H


def run(snap: Snapshot, name: str = "fifo", config: CycleConfig | None = None) -> Decision:
    from railgang.daemon.core.policies.registry import get

    return decide(snap, get(name), snap.now, random.Random(0), placer=first_fit,
                  config=config or CycleConfig())


def busy(nodes: int = 20) -> ClusterB:
    """``nodes`` nodes; all but one filled with class-1 work (so 5 % churn = 8 GPUs)."""
    return cluster(nodes).at(NOW).running(*[job(f"prod{i}").gpus(8).cls(1) for i in range(nodes - 1)])


@pytest.mark.parametrize(
    ("requester", "victim", "allowed"),
    [(0, 0, False), (0, 1, True), (1, 1, False), (2, 1, False), (1, 2, True), (2, 2, False),
     (2, 3, True), (3, 3, False), (0, 3, True)],
    ids=lambda v: str(v),
)
def test_class_rules(requester: int, victim: int, allowed: bool) -> None:
    assert class_may_preempt(requester, victim) is allowed


def test_shrink_before_preempt_and_start_at_once() -> None:
    snap = (cluster(20).at(NOW).running(*[job(f"p{i}").gpus(8).cls(1) for i in range(18)])
            .running(job("el").gpus(16).tp(8).elastic(1, 2).cls(3), start=0)
            .pending(job("prod").gpus(8).cls(1)).build())
    d = run(snap)
    kinds = [(type(a).__name__, a.job_id) for a in d.actions]
    assert kinds == [("Resize", "el"), ("Start", "prod")]
    assert not d.of(Preempt)


def test_preempt_carries_grace_and_requester() -> None:
    snap = (busy().running(job("batch").gpus(8).cls(3).with_(checkpoint_cost_s=300.0), start=0)
            .pending(job("prod").gpus(8).cls(1)).build())
    d = run(snap)
    (p,) = d.of(Preempt)
    assert isinstance(p, Preempt)
    assert (p.job_id, p.for_job, p.grace_s) == ("batch", "prod", 300.0)
    assert d.reason("prod").code is Reason.PREEMPTING  # type: ignore[union-attr]


def test_victims_lowest_class_first_then_least_lost_work() -> None:
    snap = (cluster(40).at(NOW).running(*[job(f"p{i}").gpus(8).cls(1) for i in range(37)])
            .running(job("interactive").gpus(8).cls(2), start=NOW - 60)
            .running(job("batch-old").gpus(8).cls(3).with_(checkpoint_interval_s=7000.0), start=0)
            .running(job("batch-new").gpus(8).cls(3), start=NOW - 60)
            .pending(job("prod").gpus(8).cls(1)).build())
    assert [a.job_id for a in run(snap).of(Preempt)] == ["batch-new"]


def test_per_job_minimum_interval() -> None:
    snap = (busy().running(job("batch").gpus(8).cls(3).evicted(NOW - 1800), start=NOW - 600)
            .pending(job("prod").gpus(8).cls(1)).build())
    d = run(snap)
    assert not d.of(Preempt)
    assert d.reason("prod").code is Reason.PREEMPTION_BUDGET  # type: ignore[union-attr]


def test_cluster_churn_cap_per_window() -> None:
    snap = (busy().running(job("batch").gpus(8).cls(3), start=0)
            .preempted(PreemptEvent(NOW - 300, "earlier", 4))
            .pending(job("prod").gpus(8).cls(1)).build())
    assert run(snap).reason("prod").code is Reason.PREEMPTION_BUDGET  # type: ignore[union-attr]
    old = (busy().running(job("batch").gpus(8).cls(3), start=0)
           .preempted(PreemptEvent(NOW - 900, "earlier", 4))
           .pending(job("prod").gpus(8).cls(1)).build())
    assert [a.job_id for a in run(old).of(Preempt)] == ["batch"]


def test_serving_is_exempt_from_the_churn_cap_but_not_the_class_rules() -> None:
    snap = (cluster(2).at(NOW).running(job("batch").gpus(8).cls(3), job("prod").gpus(8).cls(1))
            .pending(job("serve").gpus(16).cls(0)).build())
    assert sorted(a.job_id for a in run(snap).of(Preempt)) == ["batch", "prod"]


def test_cascade_damping_evicted_job_does_not_evict_lower_work() -> None:
    snap = (busy().running(job("batch").gpus(8).cls(3), start=0)
            .pending(job("interactive").gpus(8).cls(2).evicted(NOW - 120)).build())
    d = run(snap)
    assert not d.of(Preempt)
    assert d.reason("interactive").code is Reason.CASCADE_DAMPED  # type: ignore[union-attr]


def test_signalled_victims_are_not_preempted_twice_nor_more_victims_taken() -> None:
    snap = (busy(21).running(job("going").gpus(8).cls(3), start=0, preempt_deadline=NOW + 60)
            .running(job("other").gpus(8).cls(3), start=0)
            .pending(job("prod").gpus(8).cls(1)).build())
    d = run(snap)
    assert not d.of(Preempt)
    assert d.reason("prod").code is Reason.PREEMPTING  # type: ignore[union-attr]


def test_budget_can_be_configured() -> None:
    snap = (cluster(1).at(NOW).running(job("batch").gpus(8).cls(3), start=0)
            .pending(job("prod").gpus(8).cls(1)).build())
    assert not run(snap).of(Preempt)  # 5 % of 8 GPUs rounds to 0
    loose = CycleConfig(budget=PreemptionBudget(churn_cap=1.0))
    assert [a.job_id for a in run(snap, config=loose).of(Preempt)] == ["batch"]


def test_preemption_can_be_switched_off() -> None:
    snap = (busy().running(job("batch").gpus(8).cls(3), start=0)
            .pending(job("prod").gpus(8).cls(1)).build())
    d = run(snap, config=CycleConfig(preempt=False))
    assert d.actions == ()
    assert not any(isinstance(a, Start | Resize) for a in d.actions)


def test_victims_are_taken_node_by_node() -> None:
    # 20 full nodes of 1-GPU batch jobs; the one on GPU 0 of every node has the worst Tiresias
    # level (> 100 GPU-h), the others 1-10 GPU-h. An 8-GPU job in queue 0 needs a whole node and
    # the churn cap (5 % of 160) allows 8 GPUs: in plain rank order the first 8 victims would be
    # the worst-level jobs on 8 different nodes (no node empties; the budget is spent for
    # nothing). Node by node, it evicts the 8 jobs of one node.
    snap = cluster(20).at(NOW)
    for n in range(20):
        for g in range(8):
            worst = g == 0
            snap = snap.running(job(f"j{n:02d}-{g}").cls(3).service((200 if worst else 2) * H)
                                .work(50 * H), on={f"n{n:03d}": (g,)}, start=0)
    d = run(snap.pending(job("gang").gpus(8).cls(3).at(NOW - 60).work(H)).build(), "tiresias")
    victims = [a.job_id for a in d.of(Preempt)]
    assert len(victims) == 8 and len({v.split("-")[0] for v in victims}) == 1
    assert d.reason("gang").code is Reason.PREEMPTING  # type: ignore[union-attr]
