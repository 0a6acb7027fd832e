"""``sim --limit N`` streams (issue 18 row 9): ``model.collect`` returns exactly what reading all
and sorting returns, reads a trace in submit order no further than the first N need, and holds
about 2N jobs whatever the trace's length."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from railgang.daemon.sim.traces.csv_trace import parse_csv
from railgang.daemon.sim.traces.model import Item, TraceJob, collect


def _jobs(times: list[float], prefix: str = "j") -> list[TraceJob]:
    return [TraceJob(f"{prefix}{i}", t, 1, 10.0) for i, t in enumerate(times)]


def _counted(jobs: list[TraceJob], read: list[int]) -> Iterator[Item]:
    for job in jobs:
        read.append(1)
        yield job


def _key(job: TraceJob, n: int) -> tuple[float, int]:
    return (job.submit_time, n)


def _all_sorted(times: list[float], limit: int) -> list[str]:
    return [j.job_id for j in sorted(_jobs(times), key=lambda j: j.submit_time)][:limit]


def test_sorted_trace_stops_after_the_first_n() -> None:
    read: list[int] = []
    jobs, _ = collect([_counted(_jobs([float(t) for t in range(100_000)]), read)], limit=10,
                      key=_key)
    assert [j.job_id for j in jobs] == [f"j{i}" for i in range(10)]
    assert len(read) <= 12  # the 11th shows that nothing later can come first


def test_ties_at_the_cut_are_all_considered() -> None:
    times = [0.0, 1.0, 2.0, 2.0, 2.0, 3.0]
    jobs, _ = collect([iter(_jobs(times))], limit=3, key=_key)
    assert [j.job_id for j in jobs] == ["j0", "j1", "j2"]


@pytest.mark.parametrize("seed", range(20))
def test_same_jobs_as_reading_all(seed: int) -> None:
    # a trace in submit order (ties included), or one whose disorder shows before the cut
    rng = random.Random(seed)
    times = sorted(float(rng.randint(0, 50)) for _ in range(rng.randint(0, 300)))
    if seed % 2 and len(times) > 3:
        times[1], times[-1] = times[-1], times[1]  # out of order at row 2: read everything
    for limit in (2, 5, 37, 1000):
        jobs, _ = collect([iter(_jobs(times))], limit=limit, key=_key)
        assert [j.job_id for j in jobs] == _all_sorted(times, limit), (seed, limit)


def test_disorder_after_the_cut_is_not_seen() -> None:
    # what the docs say: a trace is read as the submit-ordered log it is
    jobs, _ = collect([iter(_jobs([0.0, 1.0, 2.0, 3.0, 0.5]))], limit=2, key=_key)
    assert [j.job_id for j in jobs] == ["j0", "j1"]


def test_merged_files_in_submit_order() -> None:
    a, b = _jobs([0.0, 5.0, 9.0], "a"), _jobs([1.0, 5.0, 7.0, 100.0], "b")
    jobs, _ = collect([iter(a), iter(b)], limit=4,
                      key=lambda job, _n: (job.submit_time, job.job_id))
    assert [j.job_id for j in jobs] == ["a0", "b0", "a1", "b1"]


def test_parse_csv_limit_matches_sorting() -> None:
    rows = ["job_id,submit_time,gpus,duration_s"] + [f"j{i},{(i * 7) % 13},1,10" for i in range(50)]
    full = parse_csv([r + "\n" for r in rows]).jobs[:5]
    assert parse_csv([r + "\n" for r in rows], limit=5).jobs == full
