"""Job model: request apart from state, sizes in DP replicas, scaling curves, validation."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.core import (
    JobRequest,
    JobState,
    RunningJob,
    allreduce,
    amdahl,
    gpu_count,
    linear,
    table,
)
from tests.daemon.core.core_builders import job


def test_replica_arithmetic() -> None:
    j = job("a").gpus(64).tp(8).pp(2).elastic(2, 8).build()
    assert (j.replica_gpus, j.replicas, j.min_gpus, j.max_gpus, j.elastic) == (16, 4, 32, 128, True)


def test_rigid_job_range_is_its_size() -> None:
    j = job("a").gpus(16).tp(8).build()
    assert (j.min_replicas, j.max_replicas, j.elastic) == (2, 2, False)


@pytest.mark.parametrize(
    "kw",
    [{"gpus": 0}, {"gpus": 12, "tp": 8}, {"gpus": 8, "priority_class": 4},
     {"gpus": 8, "elastic_min": 4, "elastic_max": 2}],
    ids=["no-gpus", "not-multiple-of-tp", "bad-class", "empty-range"],
)
def test_invalid_jobs_are_refused(kw: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        JobRequest("bad", **kw)  # type: ignore[arg-type]


def test_request_state_and_job_are_immutable() -> None:
    j = job("a").gpus(8).service(10.0).build()
    for obj, name, value in ((j.request, "gpus", 4), (j.state, "attained_gpu_s", 0.0),
                             (j, "state", JobState())):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, value)
    with pytest.raises((AttributeError, TypeError)):  # a forwarded field has no setter
        j.gpus = 4  # type: ignore[misc]


def test_a_new_state_shares_the_request_and_leaves_the_old_job_alone() -> None:
    old = job("a").gpus(8).work(100.0).build()
    new = old.with_state(JobState(attained_gpu_s=80.0, work_remaining_s=90.0, preemptions=1,
                                  last_preempted_at=5.0))
    assert new.request is old.request  # nothing about the request is copied per snapshot
    assert (new.attained_gpu_s, new.work_remaining_s, new.preemptions) == (80.0, 90.0, 1)
    assert (old.attained_gpu_s, old.work_remaining_s, old.preemptions) == (0.0, 100.0, 0)
    assert new.last_preempted_at == 5.0 and new.remaining_at(8) == 90.0


def test_the_job_reads_as_its_request_and_its_state() -> None:
    j = job("a").gpus(16).tp(2).account("nlp").cls(1).elastic(2, 16).service(7.0).build()
    for name in ("job_id", "gpus", "account", "tp", "pp", "priority_class", "replica_gpus",
                 "replicas", "min_replicas", "max_replicas", "elastic", "min_gpus", "max_gpus",
                 "elastic_min", "elastic_max", "time_limit_s", "comm_fraction", "model"):
        assert getattr(j, name) == getattr(j.request, name), name
    for name in ("attained_gpu_s", "work_remaining_s", "preemptions", "last_preempted_at"):
        assert getattr(j, name) == getattr(j.state, name), name


def test_a_renewed_running_job_keeps_its_run() -> None:
    j = job("a").gpus(8).work(100).build()
    r = RunningJob(j, {"n1": (3, 1), "n0": (0, 2, 4, 5, 6, 7)}, start_time=3.0, replicas=8,
                   last_checkpoint_time=4.0)
    later = r.with_job(j.with_state(JobState(attained_gpu_s=8.0, work_remaining_s=99.0)))
    assert later.job.request is j.request and later.job.work_remaining_s == 99.0
    assert later.assignment is r.assignment and later.gpus == 8 == gpu_count(r.assignment)
    assert (later.job_id, later.start_time, later.last_checkpoint_time) == ("a", 3.0, 4.0)
    assert later == dataclasses.replace(r, job=later.job)


def test_table_interpolates_and_saturates() -> None:
    t = table({1: 1.0, 2: 1.8, 4: 3.2})
    assert (t(1), t(2), t(3), t(4), t(8)) == (1.0, 1.8, pytest.approx(2.5), 3.2, 3.2)
    assert t(0) == 0.0


@settings(max_examples=50, deadline=None)
@given(k=st.integers(1, 512), s=st.floats(0.0, 0.5), c=st.floats(0.0, 2.0))
def test_curves_never_beat_linear_and_efficiency_is_in_0_1(k: int, s: float, c: float) -> None:
    for fn in (linear, amdahl(s), allreduce(c)):
        assert 0 < fn(k) <= k + 1e-9
        j = job("a").gpus(1).elastic(1, 512).speedup(fn).build()
        assert 0 < j.efficiency(k) <= 1 + 1e-9


def test_rate_and_remaining_time_scale_with_the_curve() -> None:
    j = job("a").gpus(4).elastic(1, 8).work(3600).build()
    assert j.rate(4) == 1.0
    assert j.remaining_at(2) == 7200
    assert job("u").gpus(1).build().remaining_at(1) is None


def test_running_job_expected_end_and_lost_work() -> None:
    j = job("a").gpus(8).work(100).with_(checkpoint_interval_s=1000.0).build()
    r = RunningJob(j, {"n1": (3, 1), "n0": (0,)}, start_time=0.0, replicas=8)
    assert list(r.assignment) == ["n0", "n1"] and r.assignment["n1"] == (1, 3)
    assert r.expected_end(50.0) == 150.0
    assert r.work_since_checkpoint_s(2500.0) == 500.0
    limited = RunningJob(job("b").gpus(1).limit(600).build(), {"n0": (0,)}, 100.0, 1)
    assert limited.expected_end(200.0) == 700.0


def test_a_signalled_job_ends_at_its_preemption_deadline() -> None:
    r = RunningJob(job("a").gpus(1).work(1e6).build(), {"n0": (0,)}, 0.0, 1, preempt_deadline=120.0)
    assert r.expected_end(100.0) == 120.0
