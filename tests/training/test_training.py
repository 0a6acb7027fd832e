"""The training-side contract: shape from the job's environment, size from Slurm, the preemption
flag, rate-limited progress reports, and the daemon-side parser of those reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railgang.training import (
    Progress,
    Shape,
    TrainingContext,
    World,
    parse_progress,
    read_progress,
    shape_from_env,
    world_from_squeue,
)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Recorder:
    def __init__(self, reply: str = "") -> None:
        self.calls: list[list[str]] = []
        self.reply = reply

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        return self.reply


def test_shape_from_the_spank_variables_slurm_exports() -> None:
    env = {"SLURM_SPANK_RAILGANG_PARALLEL": "tp8,pp2,dp4", "SLURM_SPANK_RAILGANG_ELASTIC": "2:4",
           "SLURM_SPANK_RAILGANG_CLASS": "1"}
    assert shape_from_env(env) == Shape(tp=8, pp=2, dp=4, elastic_min=2, elastic_max=4,
                                        priority_class=1)
    assert shape_from_env({}) == Shape()  # not a railgang job: one replica, batch class


def test_world_after_a_shrink_counts_gpus_per_node() -> None:
    doc = {"jobs": [{"job_id": 7, "nodes": "n[05-06]", "job_state": "RUNNING",
                     "gres_detail": ["gpu:8(IDX:0-7)", "gpu:8(IDX:0-7)"]}]}
    world = world_from_squeue(doc, "7")
    assert world == World(nodes=("n05", "n06"), gpus=16, state="RUNNING")
    assert world.replicas(Shape(tp=8, dp=2)) == 2
    shrunk = {"jobs": [{"job_id": 7, "nodes": "n05", "job_state": "RUNNING",
                        "gres_detail": ["gpu:8(IDX:0-7)"]}]}
    assert world_from_squeue(shrunk, "7").replicas(Shape(tp=8, dp=2)) == 1


def test_world_of_an_unknown_job_is_an_error() -> None:
    with pytest.raises(ValueError, match="not found"):
        world_from_squeue({"jobs": []}, "9")
    with pytest.raises(ValueError, match="jobs"):
        world_from_squeue({}, "9")
    with pytest.raises(ValueError, match="not an object"):
        world_from_squeue({"jobs": ["9"]}, "9")


def test_a_slurm_command_that_hangs_is_a_runtime_error(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # a busy slurmctld: the training loop catches RuntimeError and keeps its last size, so a
    # timeout must not escape as another kind and kill the job (seen: a requeued run FAILED)
    from railgang.training import contract as training

    def hang(*_a, **kw):  # type: ignore[no-untyped-def]
        raise subprocess.TimeoutExpired(cmd="squeue", timeout=kw["timeout"])

    monkeypatch.setattr(training.subprocess, "run", hang)
    with pytest.raises(RuntimeError, match="squeue gave no answer within 30 s"):
        TrainingContext({"SLURM_JOB_ID": "7"}).world()


def test_world_queries_squeue_for_its_own_job() -> None:
    reply = json.dumps({"jobs": [{"job_id": 3, "nodes": "n01", "job_state": "RUNNING",
                                  "gres_detail": ["gpu:4(IDX:0-3)"]}]})
    run = Recorder(reply)
    ctx = TrainingContext({"SLURM_JOB_ID": "3"}, runner=run)
    assert ctx.world().gpus == 4
    assert run.calls == [["squeue", "--json", "-j", "3"]]


def test_signal_sets_the_stop_flag_and_starts_the_grace_clock() -> None:
    clock = FakeClock()
    ctx = TrainingContext({"SLURM_JOB_ID": "1", "RAILGANG_GRACE_S": "30"}, clock=clock,
                          runner=Recorder())
    old = signal.getsignal(signal.SIGUSR1)
    try:
        ctx.install_signal_handlers([signal.SIGUSR1])
        assert not ctx.stop_requested and ctx.grace_left_s == float("inf")
        os.kill(os.getpid(), signal.SIGUSR1)
        assert ctx.stop_requested
        clock.t = 12.0
        assert ctx.grace_left_s == pytest.approx(18.0)
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_wait_for_requeue_is_bounded_by_grace_plus_slack() -> None:
    clock = FakeClock()
    ctx = TrainingContext({"RAILGANG_GRACE_S": "5"}, clock=clock, runner=Recorder())
    ctx.request_stop()
    slept: list[float] = []
    ctx.wait_for_requeue(sleep=slept.append)
    assert sum(slept) == pytest.approx(65.0)


def test_wait_for_requeue_ends_on_the_requeues_sigterm() -> None:
    ctx = TrainingContext({"RAILGANG_GRACE_S": "120"}, clock=FakeClock(), runner=Recorder())
    old = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGTERM)}
    try:
        ctx.install_signal_handlers()
        os.kill(os.getpid(), signal.SIGUSR1)  # the checkpoint signal
        assert ctx.stop_requested and not ctx.being_requeued
        slept: list[float] = []

        def sleep(s: float) -> None:
            slept.append(s)
            if len(slept) == 3:
                os.kill(os.getpid(), signal.SIGTERM)  # scontrol requeue ends the run

        ctx.wait_for_requeue(sleep=sleep)
        assert ctx.being_requeued and len(slept) == 3
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_progress_reports_are_rate_limited_and_parse_back() -> None:
    clock = FakeClock()
    run = Recorder()
    ctx = TrainingContext({"SLURM_JOB_ID": "42"}, runner=run, clock=clock, report_every_s=60)
    assert ctx.report(10, 123.4)
    clock.t = 30
    assert not ctx.report(20, 130.0)  # too soon
    assert ctx.report(20, 130.0, force=True)
    clock.t = 100
    assert ctx.report(30, 140.0)
    assert len(run.calls) == 3
    argv = run.calls[0]
    assert argv[:3] == ["scontrol", "update", "JobId=42"]
    comment = argv[3].removeprefix("Comment=")
    parsed = parse_progress(comment)
    assert parsed is not None and parsed["step"] == 10 and parsed["sps"] == 123.4


def test_a_failed_report_does_not_stop_training() -> None:
    def refuse(argv: Sequence[str]) -> str:
        raise RuntimeError("scontrol exited 1: Access/permission denied")

    assert not TrainingContext({"SLURM_JOB_ID": "1"}, runner=refuse).report(1, 1.0)


@given(st.text(max_size=80))
def test_parse_progress_never_raises(comment: str) -> None:
    out = parse_progress(comment)
    assert out is None or {"step", "sps", "t"} <= out.keys()


def test_progress_with_total_and_timings_round_trips() -> None:
    clock = FakeClock()
    run = Recorder()
    ctx = TrainingContext({"SLURM_JOB_ID": "7"}, runner=run, clock=clock, report_every_s=60)
    assert ctx.report(10, 50.0, total=100, compute_s=0.2)
    clock.t = 60.0
    assert ctx.report(130, 55.0, total=1000, compute_s=0.2)  # step time measured: 60 s / 120
    p = read_progress(run.calls[-1][3].removeprefix("Comment="))
    assert p is not None and (p.step, p.total, p.compute_s) == (130, 1000, 0.2)
    assert p.step_s == pytest.approx(0.5)
    assert p.remaining_s == pytest.approx(870 * 0.5)
    first = read_progress(run.calls[0][3].removeprefix("Comment="))
    assert first is not None and first.step_s is None and first.remaining_s is None


def test_old_comments_still_parse() -> None:
    p = read_progress("rg-progress:step=5,sps=12.5,t=1700000000")
    assert p == Progress(step=5, sps=12.5, t=1700000000)
    assert p.remaining_s is None


@pytest.mark.parametrize("comment, word", [
    ("rg-progress:step=x,sps=1,t=1", "step"),
    ("rg-progress:step=1,sps=1", "lacks t"),
    ("rg-progress:step=1,sps=nan,t=1", "sps"),
    ("rg-progress:step=1,sps=inf,t=1", "sps"),
    ("rg-progress:step=1,sps=1,t=1,total=0", "total"),
    ("rg-progress:step=9,sps=1,t=1,total=5", "past total"),
    ("rg-progress:step=1,sps=1,t=1,step_s=-2", "step_s"),
    ("rg-progress:step=1,sps=1,t=1,step_s=1,compute_s=2", "exceeds"),
    ("rg-progress:step=1,sps=1,t=1,total=1e300", "total"),
    ("rg-progress:" + "x=1," * 100 + "step=1,sps=1,t=1", "longer"),
    ("rg-progress:step=1,sps=1,t=1\nrm -rf /", "multi-line"),
], ids=["not-a-number", "missing", "nan", "inf", "zero-total", "past-total", "negative",
        "compute-over-step", "huge", "too-long", "two-lines"])
def test_hostile_progress_is_refused_with_one_line(comment: str, word: str) -> None:
    with pytest.raises(ValueError, match=word) as err:
        read_progress(comment)
    assert "\n" not in str(err.value)
    assert parse_progress(comment) is None


@given(st.text(max_size=120))
def test_read_progress_raises_only_value_error(comment: str) -> None:
    try:
        p = read_progress("rg-progress:" + comment)
    except ValueError:
        return
    assert p is not None and p.step >= 0 and (p.total is None or p.step <= p.total)
