from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from railgang.daemon.core.model.plan import Plan
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import EngineConfig, simulate
from tests.daemon.sim.conftest import first_fit, tj


def by_id(result: Any) -> dict[str, Any]:
    return {r.job_id: r for r in result.records}


def test_two_full_node_jobs_fifo_exact_jcts(one_node: Any) -> None:
    jobs = [tj("a", 0, 8, 100.0), tj("b", 0, 8, 50.0)]
    result = simulate(jobs, get("fifo"), one_node, placer=first_fit)
    recs = by_id(result)
    assert (recs["a"].start, recs["a"].finish) == (0.0, 100.0)
    assert (recs["b"].start, recs["b"].finish) == (100.0, 150.0)
    m = result.metrics
    assert m.mean_jct_s == 125.0 and m.makespan_s == 150.0 and m.mean_queueing_s == 50.0
    assert m.util_allocated == 1.0 and m.finished == 2 and result.unfinished_reasons == {}


def test_fifo_head_of_line_blocking(one_node: Any) -> None:
    jobs = [tj("a", 0, 4, 100.0), tj("b", 1, 8, 10.0), tj("c", 2, 4, 10.0)]
    recs = by_id(simulate(jobs, get("fifo"), one_node, placer=first_fit))
    assert [(recs[j].start, recs[j].finish) for j in "abc"] == [
        (0.0, 100.0), (100.0, 110.0), (110.0, 120.0)]


def test_jobs_sharing_a_node_run_concurrently(one_node: Any) -> None:
    jobs = [tj("a", 0, 4, 100.0), tj("b", 10, 4, 30.0)]
    recs = by_id(simulate(jobs, get("fifo"), one_node, placer=first_fit))
    assert recs["b"].start == 10.0 and recs["b"].finish == 40.0
    assert recs["a"].finish == 100.0


def test_oversize_job_is_rejected_not_hung(one_node: Any) -> None:
    jobs = [tj("big", 0, 64, 10.0), tj("ok", 5, 1, 10.0)]
    result = simulate(jobs, get("fifo"), one_node, placer=first_fit)
    recs = by_id(result)
    assert recs["big"].rejected and "64" in recs["big"].rejected
    assert recs["ok"].finish == 15.0
    assert (result.metrics.rejected, result.metrics.finished) == (1, 1)


@dataclass(frozen=True)
class Never:
    name = "never"

    def plan(self, snapshot: Snapshot, now: float) -> Plan:
        return Plan(order=())


def test_a_policy_that_never_starts_anything_ends_the_run(one_node: Any) -> None:
    result = simulate([tj("a", 0, 1, 10.0)], Never(), one_node, placer=first_fit,
                      config=EngineConfig(tick_s=60))
    assert result.metrics.unfinished == 1 and "a" in result.unfinished_reasons


def test_cycle_quantum_delays_starts_to_the_next_boundary(one_node: Any) -> None:
    jobs = [tj("a", 5, 8, 100.0)]
    recs = by_id(simulate(jobs, get("fifo"), one_node, placer=first_fit,
                          config=EngineConfig(cycle_s=60)))
    assert recs["a"].start == 60.0 and recs["a"].finish == 160.0


def test_empty_trace(one_node: Any) -> None:
    result = simulate([], get("fifo"), one_node, placer=first_fit)
    assert result.metrics.jobs == 0 and result.cycles == 0


@pytest.mark.parametrize("policy", ["fifo"])
def test_every_job_is_accounted_for(two_nodes: Any, policy: str) -> None:
    jobs = [tj(f"j{i}", i * 7.0, [1, 2, 4, 8, 16][i % 5], 50.0 + 13 * i) for i in range(40)]
    result = simulate(jobs, get(policy), two_nodes, placer=first_fit)
    m = result.metrics
    assert m.finished + m.rejected + m.unfinished == 40 and m.finished == 40
    assert 0 < m.util_productive <= m.util_allocated <= 1.0


def test_tiresias_preemption_through_the_engine_exact_loss(one_node: Any) -> None:
    from railgang.daemon.core.cycle import CycleConfig
    from railgang.daemon.core.model.preemption import PreemptionBudget

    # a long job has 11 GPU-h of service when a short one arrives: Tiresias evicts it. Grace
    # 120 s (the core's default), checkpoints every 1800 s, restore 120 s.
    config = EngineConfig(cycle=CycleConfig(budget=PreemptionBudget(churn_cap=1.0)))
    jobs = [tj("long", 0, 8, 100_000.0), tj("short", 5000, 8, 100.0)]
    recs = by_id(simulate(jobs, get("tiresias"), one_node, placer=first_fit, config=config))
    assert (recs["short"].start, recs["short"].finish) == (5120.0, 5220.0)
    long = recs["long"]
    assert long.preemptions == 1
    # killed at 5120, last checkpoint at 3600: 1520 s x 8 GPUs lost, plus 120 s x 8 restoring
    assert long.lost_gpu_s == pytest.approx(1520 * 8 + 120 * 8)
    # restarts at 5220, restores until 5340, then the 96,400 s left since the checkpoint
    assert long.finish == pytest.approx(5220 + 120 + 96_400)


def test_pending_cap_bounds_what_the_core_sees_without_changing_fifo(two_nodes: Any) -> None:
    jobs = [tj(f"j{i}", i * 5.0, [1, 4, 8, 16][i % 4], 100.0 + 37 * i) for i in range(30)]
    full = simulate(jobs, get("fifo"), two_nodes, placer=first_fit)
    capped = simulate(jobs, get("fifo"), two_nodes, placer=first_fit,
                      config=EngineConfig(max_pending=1))
    assert [(r.start, r.finish) for r in capped.records] == \
        [(r.start, r.finish) for r in full.records]
