"""The estimate's error measured on replayed traces (service/estimate_error.py): exact where the
answer is known, and the Philly-derived measurement runs end to end on a small slice."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.daemon.service.estimate import EstimateConfig
from railgang.daemon.service.estimate_error import (
    STANDARD_LIMITS_H,
    measure,
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
