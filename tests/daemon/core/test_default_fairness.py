"""`default`'s fairness rules (issue 12 part 5): the optional ρ guard with its drain, and victims
inside a Tiresias queue by how often they were already preempted."""

from __future__ import annotations

import math
import random

from railgang.daemon.core import Preempt, decide
from railgang.daemon.core.policies.default import Default
from railgang.daemon.core.policies.registry import get
from tests.daemon.core.core_builders import cluster, first_fit, job

H = 3600.0
NOW = 100 * H


def gang_behind_long_work(left_s: float):  # type: ignore[no-untyped-def]
    """Two nodes: an 8-GPU job and a 4-GPU job run with ``left_s`` to go, 4 GPUs free; an 8-GPU
    job of 10 minutes has waited 700 s (ρ now ≈ 1.08 on a share of 4 GPUs: fair run time 20 min)."""
    return (cluster(2).at(NOW)
            .running(job("r8").gpus(8).work(left_s), start=NOW - H)
            .running(job("r4").gpus(4).work(left_s), start=NOW - H)
            .pending(job("gang").gpus(8).at(NOW - 700).work(600),
                     job("small").gpus(4).at(NOW).work(10 * H))
            .build())


def test_rho_guard_counts_the_drain_of_a_whole_node() -> None:
    # no node empties for 3 h: ρ at the earliest start is ≈ 10, so the gang may hold the
    # reservation now although its ρ today is only 1.08
    guard = Default(promote_rho=1.5)
    plan = guard.plan(gang_behind_long_work(3 * H), NOW)
    assert plan.reserve_for == frozenset({"gang"})
    assert [w.job_id for w in plan.order] == ["gang", "small"]
    # a node empties in a minute: ρ stays below 1.5, nobody is starving
    assert guard.plan(gang_behind_long_work(60), NOW).reserve_for == frozenset()
    # the default: the guard is off, only the 4-h wait makes a job starving
    assert Default().promote_rho == math.inf
    assert Default().plan(gang_behind_long_work(3 * H), NOW).reserve_for == frozenset()


def test_victim_inside_a_queue_is_the_one_preempted_least() -> None:
    # both running jobs are in the > 100 GPU-h queue; "hit" was evicted three times and just
    # resumed, so it has lost the least work since its restart: Tiresias takes it again,
    # default takes "fresh" (never preempted)
    # (20 nodes, so the 5 % churn cap allows 8 GPUs; the other 18 run young work nobody evicts)
    snap = (cluster(20).at(NOW)
            .running(*[job(f"young{i}").gpus(8).work(H) for i in range(18)], start=NOW - 60)
            .running(job("hit").gpus(8).service(300 * H).work(50 * H).with_(preemptions=3),
                     start=NOW - 1.5 * H)
            .running(job("fresh").gpus(8).service(300 * H).work(50 * H), start=0)
            .pending(job("new").gpus(8).at(NOW - 60).work(H))
            .build())
    plan = Default().plan(snap, NOW)
    assert 2.5 < plan.levels["hit"] < plan.levels["fresh"] == 3.0

    def victims(name: str) -> list[str]:
        policy = Default() if name == "default" else get(name)
        d = decide(snap, policy, NOW, random.Random(0), placer=first_fit)
        return [a.job_id for a in d.of(Preempt)]

    assert victims("tiresias") == ["hit"]
    assert victims("default") == ["fresh"]
