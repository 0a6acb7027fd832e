"""The synthetic trace generator (benchmarks/sim/synthetic_trace.py): seeded, at the load it was asked
for, Philly-like, and readable by the simulator's CSV reader."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.sim import synthetic_trace as syn
from railgang.daemon.sim.traces.csv_trace import parse_csv


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    a, b = syn.generate(500, seed=3), syn.generate(500, seed=3)
    assert a == b
    assert syn.generate(500, seed=4) != a


@pytest.mark.parametrize(("gpus", "load"), [(1024, 0.8), (512, 0.5), (64, 1.2)],
                         ids=["1024-80pct", "512-50pct", "64-overload"])
def test_offered_load_is_what_was_asked(gpus: int, load: float) -> None:
    jobs = syn.generate(3000, gpus_total=gpus, load=load, seed=1)
    # the arrival span is a sum of exponential gaps: within a few percent at 3,000 jobs
    assert syn.offered_load(jobs, gpus) == pytest.approx(load, rel=0.08)
    assert all(j.gpus <= gpus for j in jobs)
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)


def test_sizes_and_durations_follow_the_philly_fit() -> None:
    jobs = syn.generate(20000, seed=0)
    sizes = Counter(j.gpus for j in jobs)
    total = sum(syn.PHILLY_SIZES.values())
    for g in (1, 4, 8):  # the common sizes, within 2 points of their Philly share
        assert sizes[g] / len(jobs) == pytest.approx(syn.PHILLY_SIZES[g] / total, abs=0.02)
    logs = [math.log(j.duration_s) for j in jobs if j.gpus == 1]
    mu, sigma = syn.PHILLY_LOG_DURATION[1]
    assert statistics.mean(logs) == pytest.approx(mu, abs=0.1)
    assert statistics.pstdev(logs) == pytest.approx(sigma, abs=0.1)
    assert min(j.duration_s for j in jobs) >= syn.MIN_DURATION_S


def test_the_simulator_reads_what_it_writes() -> None:
    jobs = syn.generate(200, seed=5)
    trace = parse_csv(list(syn.csv_lines(jobs)), strict=True)
    assert [(t.job_id, t.gpus, t.duration_s, t.account) for t in trace.jobs] == [
        (j.job_id, j.gpus, j.duration_s, j.account) for j in jobs]


def test_bad_arguments_are_one_line_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert syn.main(["--jobs", "0", "--out", str(tmp_path / "x.csv")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("synthetic_trace:") and "\n" not in err


@pytest.mark.parametrize("shape", ["gangs", "small", "diurnal"])
def test_every_shape_is_at_the_load_asked_with_its_own_sizes(shape: str) -> None:
    sizes, fit, _ = syn.SHAPES[shape]
    jobs = syn.generate(3000, load=0.8, seed=2, shape=shape)
    assert syn.offered_load(jobs, 1024) == pytest.approx(0.8, rel=0.1)
    assert {j.gpus for j in jobs} <= set(sizes)
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)
    if fit is not None:  # one duration fit for every size: the median does not follow the size
        small = statistics.median(j.duration_s for j in jobs if j.gpus == min(sizes))
        large = statistics.median(j.duration_s for j in jobs if j.gpus == max(sizes))
        assert 0.5 < small / large < 2.0


def test_the_philly_shape_is_the_trace_written_before_shapes() -> None:
    assert syn.generate(500, seed=5, shape="philly") == syn.generate(500, seed=5)
    with pytest.raises(ValueError, match="unknown shape"):
        syn.generate(10, shape="nope")
