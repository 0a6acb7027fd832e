from __future__ import annotations

import math

import pytest

from railgang.daemon.sim.metrics import JobRecord, compute, percentile


def rec(job_id: str, submit: float, start: float | None, finish: float | None, *, gpus: int = 1,
        duration: float = 10.0, account: str = "a", **kw: float) -> JobRecord:
    r = JobRecord(job_id=job_id, account=account, gpus=gpus, submit=submit, duration_s=duration,
                  start=start, finish=finish)
    for key, value in kw.items():
        setattr(r, key, value)
    return r


def test_percentile_linear_interpolation() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 100) == 4.0
    assert percentile([5.0], 99) == 5.0
    assert math.isnan(percentile([], 50))


def test_two_jobs_hand_computed() -> None:
    # cluster of 8 GPUs; A 8 GPUs 0..10, B 8 GPUs submitted at 0, runs 10..20
    records = [
        rec("A", 0, 0, 10, gpus=8, allocated_gpu_s=80, productive_gpu_s=80, mean_jobs_in_system=2),
        rec("B", 0, 10, 20, gpus=8, allocated_gpu_s=80, productive_gpu_s=60,
            mean_jobs_in_system=1.5, account="b"),
    ]
    m = compute(records, cluster_gpus=8)
    assert (m.jobs, m.finished, m.rejected, m.unfinished) == (2, 2, 0, 0)
    assert m.mean_jct_s == 15 and m.median_jct_s == 15
    assert m.p99_jct_s == pytest.approx(10 + 10 * 0.99)
    assert m.mean_queueing_s == 5 and m.makespan_s == 20
    assert m.util_allocated == 1.0 and m.util_productive == pytest.approx(140 / 160)
    # rho: share = 8/N; A: N=2 -> share 4, ideal = 10*8/4 = 20 -> 10/20; B: share 5.33 -> 15
    assert m.rho_mean == pytest.approx((0.5 + 20 / 15) / 2)
    assert m.rho_max == pytest.approx(20 / 15) and m.rho_share_above_2 == 0
    assert [(a.account, a.jobs, a.mean_jct_s) for a in m.per_account] == [("a", 1, 10),
                                                                         ("b", 1, 20)]


def test_preemption_and_rejection_accounting() -> None:
    records = [
        rec("A", 0, 0, 100, duration=40, preemptions=2, resizes=1, lost_gpu_s=7200,
            allocated_gpu_s=100),
        rec("R", 5, None, None, gpus=64, rejected="larger than the cluster"),
        rec("U", 50, 60, None),
    ]
    m = compute(records, cluster_gpus=8)
    assert (m.finished, m.rejected, m.unfinished) == (1, 1, 1)
    assert m.preemptions == 2 and m.resizes == 1 and m.gpu_hours_lost_to_preemption == 2.0
    assert m.rho_max == pytest.approx(100 / 40) and m.rho_share_above_2 == 1.0
    assert m.mean_queueing_s == 5  # A waited 0, U waited 10
    assert m.to_dict()["per_account"][0]["jobs"] == 3  # type: ignore[index]
