"""The Young–Daly interval reaches the job (issue 33 item 3): the daemon writes ``ckpt=SECONDS``
into the railgang tag (AdminComment) in the update that starts the job, and the training helper
reads it back from squeue."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from railgang.daemon.core.model.actions import Start
from railgang.daemon.failures.advice import advised_interval_s, mtbf_s
from railgang.daemon.failures.young_daly import young_daly_s
from railgang.daemon.service.explain import checkpoint_advice
from railgang.daemon.slurm.cli.apply import ApplyConfig, apply_actions
from railgang.daemon.slurm.cli.parse import ParseProblem, RailgangTag, parse_tag
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.training import TrainingContext
from tests.daemon.slurm.cli.capture import NOW, observation
from tests.daemon.slurm.cli.test_apply import Recorder

EIGHT = tuple(range(8))
NODES = {"n09": EIGHT, "n10": EIGHT, "n11": EIGHT, "n12": EIGHT}


def test_the_tag_carries_the_interval() -> None:
    tag = RailgangTag(tp=8, dp=2, ckpt=1234)
    assert tag.render().endswith(";ckpt=1234") and parse_tag(tag.render()) == tag
    assert parse_tag("railgang:class=1").ckpt is None  # type: ignore[union-attr]
    for bad in ("0", "-5", "x", "99999999999"):
        with pytest.raises(ParseProblem, match="ckpt"):
            parse_tag(f"railgang:class=1;ckpt={bad}")


def test_the_advice_is_explains_interval_on_the_jobs_nodes() -> None:
    obs = observation()
    job = next(j for j in obs.snapshot.pending if j.job_id == "11")
    fabric = obs.snapshot.fabric
    leaves = sorted({fabric.leaf_of(n) for n in NODES})
    shown = checkpoint_advice(job, NODES, fabric, leaves)
    assert shown is not None
    got = advised_interval_s(job.checkpoint_cost_s, NODES, fabric)
    assert got == round(shown["interval_s"])  # type: ignore[arg-type]
    assert got == round(young_daly_s(job.checkpoint_cost_s, mtbf_s(NODES, fabric)))
    assert advised_interval_s(job.checkpoint_cost_s, {}, fabric) is None
    assert advised_interval_s(float("nan"), NODES, fabric) is None
    assert advised_interval_s(2e6, NODES, fabric) == 4_000_000  # never below twice the cost


def test_a_start_writes_the_interval_into_the_tag() -> None:
    obs = observation()
    job = next(j for j in obs.snapshot.pending if j.job_id == "11")
    rec = Recorder()
    [result] = apply_actions(SlurmRunner(exec_fn=rec), obs, [Start("11", NODES, 2)], NOW, ApplyConfig())
    assert result.ok
    line = (rec.calls[0][1] or "").splitlines()[0]
    assert line.startswith("update jobid=11 NumNodes=4-4 ReqNodeList=n[09-12] TresPerJob= Gres=gpu:8 "
                           "StartTime=now AdminComment=railgang:")
    tag = parse_tag(line.split("AdminComment=", 1)[1])
    assert tag is not None and tag.ckpt == advised_interval_s(job.checkpoint_cost_s, NODES,
                                                              obs.snapshot.fabric)
    assert tag.tp == 8 and tag.pp == 2 and tag.priority_class == 0  # the rest of the tag kept


def _squeue(admin_comment: object) -> str:
    return json.dumps({"jobs": [{"job_id": 7, "job_state": "RUNNING", "nodes": "n1",
                                 "admin_comment": admin_comment}]})


@pytest.mark.parametrize(("comment", "want"), [
    ("railgang:tp=8,pp=1,dp=2;class=1;ckpt=2400", 2400.0),
    ("railgang:class=1;ckpt=2400;preempt=5@0", 2400.0),
    ("railgang:class=1", None),  # started before the daemon wrote advice, or by Slurm itself
    ("", None), (None, None), ("someone:ckpt=5", None), ("railgang:ckpt=abc", None),
])
def test_the_training_helper_reads_the_advised_interval(comment: object, want: float | None) -> None:
    calls: list[Sequence[str]] = []

    def runner(argv: Sequence[str]) -> str:
        calls.append(argv)
        return _squeue(comment)

    ctx = TrainingContext({"SLURM_JOB_ID": "7"}, runner=runner)
    assert ctx.advised_checkpoint_interval_s() == want
    assert calls == [["squeue", "--json", "-j", "7"]]


def test_no_advice_when_slurm_does_not_answer() -> None:
    def broken(argv: Sequence[str]) -> str:
        raise RuntimeError("squeue: error: slurm_load_jobs error: Unable to contact slurm controller")

    assert TrainingContext({"SLURM_JOB_ID": "7"}, runner=broken).advised_checkpoint_interval_s() is None
    assert TrainingContext({}, runner=broken).advised_checkpoint_interval_s() is None  # not in a job
