"""Start-time estimates on small hand-built snapshots whose answer is known, through the real
core, policies, placement and simulator (service/estimate.py)."""

from __future__ import annotations

from typing import Any

import pytest

from railgang.daemon.core.model.job import Job, JobRequest, JobState, RunningJob
from railgang.daemon.core.model.snapshot import Node, Snapshot, make_snapshot
from railgang.daemon.core.policies import registry
from railgang.daemon.service.estimate import (
    EstimateConfig,
    RatioHistory,
    StartEstimator,
    estimate_starts,
    run_time,
)
from railgang.topology.fabric import fabric_from_shape

FABRIC = fabric_from_shape(2, 8, 2)  # 16 GPUs: n01, n02
EXACT = EstimateConfig(cycle_s=0.0, wall_s=5.0)  # a cycle at every event: exact start times


def req(job_id: str, gpus: int, *, limit: float | None = 3600.0, priority_class: int = 3,
        account: str = "team-a", submit: float = -100.0, work: float | None = None) -> Job:
    return Job(JobRequest(job_id, gpus, account=account, submit_time=submit, tp=min(gpus, 8),
                          priority_class=priority_class, time_limit_s=limit),
               JobState(work_remaining_s=work))


def gang(job: Job, nodes: dict[str, tuple[int, ...]], start: float) -> RunningJob:
    return RunningJob(job, nodes, start_time=start, replicas=sum(map(len, nodes.values())) // job.tp)


WHOLE = {"n01": tuple(range(8)), "n02": tuple(range(8))}


def snap(running: list[RunningJob], pending: list[Job], *, now: float = 0.0,
         free: dict[str, frozenset[int]] | None = None) -> Snapshot:
    nodes = [Node(n, FABRIC.facts(n).gpus) for n in FABRIC.nodes]
    return make_snapshot(now=now, fabric=FABRIC, nodes=nodes, running=running, pending=pending,
                         free=free)


def estimate(s: Snapshot, policy: str = "default", **kw: Any) -> Any:
    return estimate_starts(s, registry.get(policy), config=kw.pop("config", EXACT), **kw)


@pytest.mark.parametrize("policy", ["fifo", "default", "slurm"])
def test_a_job_behind_a_running_gang_that_ends_at_t_starts_at_t(policy: str) -> None:
    # the gang holds every GPU and ran 600 s of its 3,600 s limit: it ends at 3,000 s
    s = snap([gang(req("a", 16), WHOLE, start=-600.0)], [req("b", 8)])
    e = estimate(s, policy)
    b = e.for_job("b")
    assert b["status"] == "estimated" and b["start_s"] == 3000.0 and b["start_at"] == 3000.0
    assert b["p10_s"] == b["p90_s"] == 3000.0 and b["started_in"] == e.simulations == 9
    assert b["remaining_from"] == {"time_limit": 1} and b["policy"] == policy


def test_progress_beats_the_time_limit() -> None:
    s = snap([gang(req("a", 16, work=1200.0), WHOLE, start=-600.0)], [req("b", 8)])
    b = estimate(s).for_job("b")
    assert b["start_s"] == 1200.0 and b["remaining_from"] == {"progress": 1}


def test_the_first_job_in_line_with_room_starts_now() -> None:
    half = {"n01": tuple(range(8))}
    s = snap([gang(req("a", 8), half, start=-10.0)], [req("c", 8, submit=-200.0), req("b", 8)])
    e = estimate(s)
    assert e.jobs["c"].start_s == 0.0 and e.jobs["c"].status == "estimated"
    assert e.jobs["b"].start_s == 3590.0  # the next 8 GPUs come back when "a" hits its limit


def test_a_job_that_can_never_fit_is_never() -> None:
    e = estimate(snap([], [req("huge", 64)]))
    huge = e.for_job("huge")
    assert huge["status"] == "never" and huge["start_s"] is None and "16 GPUs" in huge["note"]


def test_gpus_nothing_frees_leave_the_job_beyond_the_horizon() -> None:
    # 8 GPUs are held by a job the snapshot does not show (not railgang's): they stay held
    free = {"n01": frozenset(range(8)), "n02": frozenset()}
    e = estimate(snap([], [req("x", 16)], free=free))
    x = e.jobs["x"]
    assert x.status == "beyond_horizon" and x.start_s is None and "nothing" in x.note


def test_a_job_whose_blocker_outlasts_the_horizon_is_beyond_it() -> None:
    s = snap([gang(req("a", 16, limit=30 * 86400.0), WHOLE, start=0.0)], [req("b", 8)])
    e = estimate(s, config=EstimateConfig(cycle_s=0.0, horizon_s=86400.0))
    b = e.for_job("b")
    assert b["status"] == "beyond_horizon" and b["not_before_s"] == 86400.0
    assert b["start_s"] is None and "24 h horizon" in b["note"]


def test_an_unknown_run_time_runs_past_the_horizon() -> None:
    s = snap([gang(req("a", 16, limit=None), WHOLE, start=0.0)], [req("b", 8)])
    e = estimate(s)
    assert e.jobs["b"].status == "beyond_horizon" and e.sources["unknown"] == 1


def test_a_spent_budget_without_the_profile_is_a_lower_bound_not_a_guess() -> None:
    s = snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8)])
    e = estimate(s, config=EstimateConfig(cycle_s=0.0, max_events=1, samples=2, profile=False))
    b = e.jobs["b"]
    assert b.status == "budget" and b.start_s is None and b.not_before_s is not None
    assert e.stopped == {"events": 3}


def test_past_a_spent_budget_the_profile_places_what_the_simulation_did_not_reach() -> None:
    s = snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8), req("c", 16), req("d", 8)])
    e = estimate(s, config=EstimateConfig(cycle_s=0.0, max_events=1, samples=2))
    assert e.stopped == {"events": 3}
    got = {j: (e.jobs[j].status, e.jobs[j].start_s) for j in "bcd"}
    # the gang frees all 16 GPUs at its 1 h limit: b then c in queue order; d beside b
    assert got == {"b": ("estimated", 3600.0), "c": ("estimated", 7200.0),
                   "d": ("estimated", 3600.0)}
    assert "GPU-count profile" in e.jobs["b"].note
    assert "GPU-count profile" in (e.for_job("c") or {}).get("note", "")


def test_a_higher_class_overtakes_the_queue() -> None:
    s = snap([gang(req("a", 16), WHOLE, start=0.0)],
             [req("old", 16, submit=-500.0), req("urgent", 16, priority_class=1, submit=-1.0)])
    e = estimate(s, config=EstimateConfig(cycle_s=0.0, samples=0))
    assert e.jobs["urgent"].start_s == 3600.0 and e.jobs["old"].start_s == 7200.0


def history_of(ratios: list[float], account: str = "team-a", priority_class: int = 3) -> RatioHistory:
    h = RatioHistory(min_samples=3)
    for r in ratios:
        h.add(account, priority_class, r)
    return h


def test_history_scales_the_limit_and_gives_an_interval() -> None:
    h = history_of([0.2, 0.25, 0.5, 0.75, 1.0])
    s = snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8)])
    e = estimate(s, history=h, config=EstimateConfig(cycle_s=0.0, samples=20))
    b = e.jobs["b"]
    # median draw: 0.5 x 3,600; the random draws spread over the five ratios
    assert b.start_s is not None and b.p10_s is not None and b.p90_s is not None
    assert b.p10_s < b.start_s < b.p90_s and b.p10_s >= 720.0 and b.p90_s <= 3600.0
    assert e.sources["history"] == 1 and e.for_job("b")["remaining_from"] == {"history": 1}
    median_only = estimate(s, history=h, config=EstimateConfig(cycle_s=0.0, samples=0))
    assert median_only.jobs["b"].start_s == 1800.0


def test_a_running_job_draws_only_ratios_it_has_not_outlived() -> None:
    h = history_of([0.1, 0.2, 0.3, 0.9])
    job = req("a", 16)
    first = lambda values: min(values)  # noqa: E731
    assert run_time(job, 0.0, h, first) == (360.0, "history")
    assert run_time(job, 2000.0, h, first) == (pytest.approx(1240.0), "history")  # 0.9 only
    assert run_time(job, 3500.0, h, first) == (100.0, "history")  # outlived all: its limit
    assert run_time(job, 0.0, RatioHistory(), first) == (3600.0, "time_limit")


def test_history_falls_back_from_account_to_class_to_fleet() -> None:
    h = RatioHistory(min_samples=2)
    h.add("team-b", 2, 0.5)
    h.add("team-b", 2, 0.5)
    assert h.ratios("team-b", 3)[1] == "account"
    assert h.ratios("team-c", 2)[1] == "class"
    assert h.ratios("team-c", 1)[1] == "all"
    assert RatioHistory().ratios("x", 3) == ((), "")


def test_history_learns_from_jobs_that_finish_not_from_preempted_ones() -> None:
    h = RatioHistory(min_samples=1)
    a, b = req("a", 8), req("b", 8)
    first = snap([gang(a, {"n01": tuple(range(8))}, start=0.0),
                  gang(b, {"n02": tuple(range(8))}, start=0.0)], [], now=1790.0)
    assert h.observe(first) == 0
    # "a" finished (left, not queued); "b" was preempted (back in the queue)
    second = snap([], [b], now=1810.0)
    assert h.observe(second) == 1
    assert list(h.ratios("team-a", 3)[0]) == [0.5]


def test_estimates_are_deterministic() -> None:
    h = history_of([0.1, 0.4, 0.6, 0.8, 1.0])
    s = snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8), req("c", 16)])
    one, two = estimate(s, history=h), estimate(s, history=h)
    assert one.jobs == two.jobs


def test_the_daemon_side_reestimates_only_when_due() -> None:
    est = StartEstimator("default", config=EXACT, interval_s=60.0)
    s = snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8)])
    rows = est.refresh(s)
    assert rows["b"]["start_s"] == 3600.0 and rows["b"]["as_of"] == 0.0
    later = snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8), req("c", 8)], now=30.0)
    assert est.refresh(later) is rows and "c" not in rows  # not due: the same estimate
    due = est.refresh(snap([gang(req("a", 16), WHOLE, start=0.0)],
                           [req("b", 8), req("c", 8)], now=60.0))
    assert due["b"]["start_s"] == 3540.0 and due["c"]["start_s"] == 3540.0


def test_public_surface() -> None:
    from railgang.daemon.service import estimate, estimate_error

    assert set(estimate.__all__) == {
        "SOURCES", "EstimateConfig", "Estimates", "RatioHistory", "StartEstimate",
        "StartEstimator", "estimate_starts", "render_estimate", "run_time", "start_estimator"}
    assert set(estimate_error.__all__) == {
        "STANDARD_LIMITS_H", "VARIANTS", "Measurement", "Prediction", "measure",
        "moment_interval", "synthetic", "with_time_limits"}


def test_explain_says_when_a_start_comes_from_the_profile() -> None:
    from railgang.daemon.service.estimate import render_estimate

    s = snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8)])
    e = estimate(s, config=EstimateConfig(cycle_s=0.0, max_events=1, samples=0))
    line = render_estimate(e.for_job("b") or {})
    assert "expected start: in 60 min" in line and "GPU-count profile" in line, line


@pytest.mark.parametrize("order, first", [("policy", "c"), ("queue", "b")])
def test_the_profile_takes_the_queue_in_the_cycles_order_classes_first(order: str,
                                                                        first: str) -> None:
    # b (class 3) was submitted before c (class 1, the whole cluster): the cycle tries c first
    s = snap([gang(req("a", 16), WHOLE, start=0.0)],
             [req("b", 8), req("c", 16, priority_class=1)])
    e = estimate(s, config=EstimateConfig(cycle_s=0.0, max_events=1, samples=0,
                                          profile_order=order))
    assert all(e.jobs[j].profiled for j in "bc")
    assert e.jobs[first].start_s == 3600.0 and e.jobs["bc".replace(first, "")].start_s == 7200.0
