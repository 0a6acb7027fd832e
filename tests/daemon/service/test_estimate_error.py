"""The estimate's error measured on replayed traces (service/estimate_error.py): exact where the
answer is known, and the Philly-derived measurement runs end to end on a small slice."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.daemon.service.estimate import EstimateConfig
from railgang.daemon.service.estimate_error import (
    STANDARD_LIMITS_H,
    Measurement,
    Prediction,
    measure,
    moment_interval,
    synthetic,
    with_time_limits,
)
from railgang.daemon.sim.traces.model import TraceJob
from railgang.daemon.sim.traces.philly import default_dir, read_philly
from railgang.topology.fabric import fabric_from_shape

SMALL = EstimateConfig(samples=2, wall_s=2.0)


def test_whole_node_jobs_with_exact_limits_under_fifo_are_predicted_exactly() -> None:
    # one node, every job needs all of it, limits equal run times: the queue is a strict
    # sequence whose start times the limits alone tell, and no later arrival overtakes under fifo
    jobs = [TraceJob(f"j{i}", 300.0 * i, 8, 600.0 + 60 * i, tp=8, time_limit_s=600.0 + 60 * i)
            for i in range(8)]
    m = measure(jobs, fabric_from_shape(1, 8, 1), policy="fifo", moments=3, cycle_s=0.0,
                variants=("limit",), config=EstimateConfig(samples=1, cycle_s=0.0))
    s = m.summary("limit")
    assert m.moments == 3 and s["predictions"] == s["estimated"] > 0
    assert s["median_err_h"] == s["p90_err_h"] == 0.0 and s["coverage"] == 1.0


def test_moments_with_a_short_queue_are_passed_over_when_deep_queues_are_asked_for() -> None:
    jobs = [TraceJob(f"j{i}", 300.0 * i, 8, 600.0, tp=8, time_limit_s=600.0) for i in range(8)]
    m = measure(jobs, fabric_from_shape(1, 8, 1), policy="fifo", moments=3, cycle_s=0.0,
                variants=("limit",), config=EstimateConfig(samples=1, cycle_s=0.0),
                min_queue=100)
    assert m.moments == 0 and m.predictions == []


def test_the_summary_splits_simulated_and_profile_estimates_calibrated_together() -> None:
    m = Measurement(min_scores=1)
    for i in range(40):  # one job per moment; every third placed on the profile
        m.predictions.append(Prediction("history", f"j{i}", 3600.0 * i, "estimated", 600.0,
                                        300.0, 900.0, None, actual_s=600.0 + 100.0 * (i % 7),
                                        profiled=i % 3 == 0))
    every, sim, prof = (m.summary("history", s) for s in (None, "simulated", "profile"))
    assert every["estimated"] == 40 and prof["estimated"] == 14 and sim["estimated"] == 26
    assert every["calibrated"] == sim["calibrated"] + prof["calibrated"] == 39
    assert every["coverage_ci"] is not None
    lo, hi = every["coverage_ci"]
    assert lo <= every["coverage_once_calibrated"] <= hi


def test_the_coverage_interval_resamples_whole_moments() -> None:
    assert moment_interval([(0.0, True), (0.0, False)]) is None  # one moment: no interval
    same = moment_interval([(float(t), t % 2 == 0) for t in range(10) for _ in range(5)])
    assert same is not None and same[0] < 0.5 < same[1]
    # a moment whose 50 intervals all missed together weighs as one moment, not 50 draws
    lumpy = moment_interval([(0.0, False)] * 50 + [(float(t), True) for t in range(1, 11)])
    assert lumpy is not None and lumpy[0] < 0.1 and lumpy[1] > 0.3


def test_time_limits_look_like_users_limits() -> None:
    jobs = with_time_limits(synthetic(300))
    assert all(j.time_limit_s is not None and j.time_limit_s >= j.duration_s for j in jobs)
    standard = {h * 3600.0 for h in STANDARD_LIMITS_H}
    at_limit = sum(j.time_limit_s == j.duration_s for j in jobs)
    assert 0.05 < at_limit / len(jobs) < 0.2  # one in ten runs into its limit
    assert sum(j.time_limit_s in standard for j in jobs) > 0.8 * len(jobs)
    assert with_time_limits(synthetic(300)) == jobs  # seeded


@pytest.fixture(scope="module")
def philly_slice() -> list[TraceJob]:
    path: Path = default_dir()
    if not (path / "simulation_throughputs.json").is_file():
        pytest.fail(f"Philly-derived trace not found at {path}: check out ../shared or set "
                    "RAILGANG_PHILLY_DIR (this test must not be skipped)")
    return with_time_limits(read_philly(path).jobs[:250])


def test_the_philly_error_measurement_runs_on_a_slice(philly_slice: list[TraceJob]) -> None:
    m = measure(philly_slice, fabric_from_shape(8, 8, 4), moments=4, variants=("history", "limit"),
                config=SMALL)
    assert m.moments >= 2 and min(m.queue) >= 1
    assert all(p.actual_s is not None for p in m.predictions)  # the replay starts every job
    for variant in ("history", "limit"):
        s = m.summary(variant)
        assert s["predictions"] == sum(m.queue) and s["estimated"] > 0
        assert s["median_err_h"] is not None and 0 <= s["median_err_h"] <= s["p90_err_h"]
        assert 0.0 <= s["coverage"] <= 1.0 and s["never"] == 0
        # "not before" holds under the simulation's run times; shorter real runs can beat it
        assert 0 <= s["censored_held"] <= s["censored"]
