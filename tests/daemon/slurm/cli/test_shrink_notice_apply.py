"""A shrink with notice on Slurm (issue 39): signal and mark first, NodeList after the grace or once
the job says it is ready; a job in its notice is shown in flight and is not resized again."""

from __future__ import annotations

import dataclasses

import pytest

from railgang.daemon.core.model.actions import Resize
from railgang.daemon.slurm.cli.apply import (
    ApplyConfig,
    apply_actions,
    died_of_the_signal,
    finish_due,
    shrinks_due,
)
from railgang.daemon.slurm.cli.parse import ParseProblem, parse_tag
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.daemon.slurm.cli.snapshot import Observation, core_job, core_running
from railgang.training import Progress
from tests.daemon.slurm.cli.capture import NOW, observation
from tests.daemon.slurm.cli.test_apply import EIGHT, Recorder


def _noticed(grace: float = 30) -> tuple[Observation, str, Recorder]:
    """Job 9 (n01+n02, batch host n01) noticed to shrink to one node; the observation after."""
    rec = Recorder()
    obs = observation()
    [res] = apply_actions(SlurmRunner(exec_fn=rec), obs, [Resize("9", 1, {"n02": EIGHT}, 2, grace)],
                          NOW, ApplyConfig())
    assert res.ok and "shrink notice" in res.detail and "shrink to n01 after 30s" in res.detail
    comment = (rec.calls[0][1] or "").split("AdminComment=", 1)[1].strip()
    marked = dataclasses.replace(obs.jobs["9"], admin_comment=comment, tag=parse_tag(comment))
    return dataclasses.replace(obs, jobs={**obs.jobs, "9": marked}), comment, rec


def test_the_notice_is_a_mark_with_the_new_size_and_the_checkpoint_signal_no_nodelist() -> None:
    _, comment, rec = _noticed()
    assert comment.endswith(f"shrink={NOW + 30:.0f}@0@n01x8")  # the batch host is kept
    assert "NodeList" not in (rec.calls[0][1] or "")
    assert rec.calls[1][0] == ("scancel", "--signal=USR1", "--full", "9")


def test_without_a_grace_the_shrink_is_at_once_without_a_signal() -> None:
    rec = Recorder()
    apply_actions(SlurmRunner(exec_fn=rec), observation(), [Resize("9", 1, {"n02": EIGHT}, 2)], NOW,
                  ApplyConfig())
    assert rec.calls == [(("scontrol",), "update jobid=9 NodeList=n01\n")]


def test_a_job_in_its_notice_is_in_flight_with_every_gpu_it_holds() -> None:
    obs, _, _ = _noticed()
    rec = obs.jobs["9"]
    assert rec.tag is not None
    run = core_running(rec, rec.tag, core_job(rec, rec.tag, NOW))
    assert run.preempt_deadline == NOW + 30 and run.gpus == 16 and run.shrink_to == 1


def test_it_is_not_shrunk_again_nor_grown_while_noticed() -> None:
    obs, _, _ = _noticed()
    rec = Recorder()
    again, grow = apply_actions(SlurmRunner(exec_fn=rec), obs, [
        Resize("9", 1, {"n02": EIGHT}, 2, 30), Resize("9", 3, {"n01": EIGHT, "n02": EIGHT, "n03": EIGHT}, 2)],
        NOW + 3, ApplyConfig())
    assert again.ok and again.detail == f"already shrinking: due at {NOW + 30:.0f}"
    assert not grow.ok and "shrink notice" in grow.detail
    assert rec.calls == []  # the deadline is not pushed out, no second signal


def test_the_shrink_comes_after_the_grace_and_clears_the_mark() -> None:
    obs, _, _ = _noticed()
    assert shrinks_due(obs, NOW + 29) == []
    assert [r.job_id for r in shrinks_due(obs, NOW + 30)] == ["9"]
    rec = Recorder()
    done = finish_due(SlurmRunner(exec_fn=rec), obs, NOW + 30, ApplyConfig())
    lines = (rec.calls[-1][1] or "").splitlines()
    assert "shrink=" not in lines[0] and lines[0].startswith("update jobid=9 AdminComment=railgang:")
    assert lines[1] == "update jobid=9 NodeList=n01"
    assert [(f.step, f.ok) for f in done] == [("shrink", True)]


def test_a_refused_shrink_is_one_follow_up_line() -> None:
    obs, _, _ = _noticed()
    rec = Recorder({"scontrol": "Requested node configuration is not available for job 9\n"})
    [f] = finish_due(SlurmRunner(exec_fn=rec), obs, NOW + 31, ApplyConfig())
    assert (f.step, f.ok) == ("shrink", False) and f.detail.startswith("shrink refused: ")


@pytest.mark.parametrize(("ready", "due"), [(NOW + 30, True), (NOW + 29, False), (None, False)])
def test_the_job_may_say_it_is_ready_for_this_notice_only(ready: float | None, due: bool) -> None:
    obs, _, _ = _noticed()
    job = dataclasses.replace(obs.jobs["9"], progress=Progress(step=5, sps=1.0, t=int(NOW), ready=ready))
    obs = dataclasses.replace(obs, jobs={**obs.jobs, "9": job})
    assert bool(shrinks_due(obs, NOW + 2)) is due


def test_a_batch_script_the_notice_killed_is_requeued() -> None:
    obs, _, _ = _noticed()
    dead = dataclasses.replace(obs.jobs["9"], state="FAILED", exit_signal=10)
    assert died_of_the_signal([dead]) == [dead]
    rec = Recorder()
    done = finish_due(SlurmRunner(exec_fn=rec), observation(), NOW + 1, ApplyConfig(), ended=[dead])
    assert rec.calls[0][0] == ("scontrol", "requeue", "9") and done[0].step == "requeue"


@pytest.mark.parametrize("bad", ["shrink=1@0", "shrink=1@0@n01", "shrink=x@0@n01x8"])
def test_a_malformed_shrink_mark_is_a_parse_problem(bad: str) -> None:
    with pytest.raises(ParseProblem):
        parse_tag(f"railgang:class=3;{bad}")
