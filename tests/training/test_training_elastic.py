"""The elastic side of the training contract (issue 39): the shrink notice read from the daemon's
tag, ready= in the progress report, a rendezvous that stays put, the batch / learning-rate rule.
The job's own text (its Comment) is hostile; the tag is the daemon's, but read defensively too."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from hostlist import expand_hostlist

from railgang.training import (
    Progress,
    TrainingContext,
    format_progress,
    read_progress,
    rendezvous,
    scale_batch,
    shrink_notice,
)

TAG = "railgang:tp=8,pp=1,dp=4;elastic=1:4;class=3;shrink=1800000030@0@n[01-02]x8;ckpt=600"


def squeue(comment: str, batch_host: str = "n01", nodes: str = "n[01-04]") -> str:
    return json.dumps({"jobs": [{"job_id": 42, "admin_comment": comment, "batch_host": batch_host,
                                 "nodes": nodes, "job_state": "RUNNING",
                                 "gres_detail": ["gpu:8(IDX:0-7)"] * len(expand_hostlist(nodes))}]})


class Slurm:
    def __init__(self, reply: str) -> None:
        self.reply, self.calls = reply, list[list[str]]()

    def __call__(self, argv: Sequence[str]) -> str:
        self.calls.append(list(argv))
        return self.reply if argv[0] == "squeue" else ""


ENV = {"SLURM_JOB_ID": "42", "SLURM_SPANK_RAILGANG_PARALLEL": "tp8,dp4",
       "SLURM_SPANK_RAILGANG_ELASTIC": "1:4", "SLURM_JOB_NODELIST": "n[01-04]"}


def test_the_context_reads_the_new_size_and_when_it_applies() -> None:
    ctx = TrainingContext(ENV, runner=Slurm(squeue(TAG)))
    notice = ctx.pending_resize()
    assert notice is not None and notice.nodes == ("n01", "n02") and notice.gpus == 16
    assert notice.applies_at == 1800000030.0 and notice.seconds_left(1800000000.0) == 30.0
    assert ctx.pending_replicas() == (2, 1800000030.0)
    assert ctx.current_replicas() == 4
    assert ctx.advised_checkpoint_interval_s() == 600.0  # the tag's other reader still works


@pytest.mark.parametrize("comment", [
    TAG.replace("@0@", "@1@"),  # a mark of the run before a requeue: stale
    "railgang:class=3", "", "rg-progress:step=1;shrink=1@0@n01x8", "railgang:class=3;shrink=1@0@n01",
    "railgang:class=3;shrink=1@0@n[01-x8", "railgang:class=3;shrink=99999999999999@0@n01x8"])
def test_anything_but_a_current_notice_is_none(comment: str) -> None:
    assert shrink_notice(comment, 0) is None


def test_no_notice_when_slurm_does_not_answer() -> None:
    def down(argv: Sequence[str]) -> str:
        raise RuntimeError("squeue exited 1: slurm_load_jobs error")

    ctx = TrainingContext(ENV, runner=down)
    assert ctx.pending_resize() is None and ctx.pending_replicas() is None


def test_ready_echoes_this_notices_deadline_in_the_report_and_clears_the_stop() -> None:
    slurm = Slurm(squeue(TAG))
    ctx = TrainingContext(ENV, runner=slurm)
    ctx.request_stop()
    assert ctx.ready_for_resize(120, 33.0)
    assert not ctx.stop_requested
    update = next(c for c in slurm.calls if c[0] == "scontrol")
    progress = read_progress(update[-1].removeprefix("Comment="))
    assert progress is not None and progress.ready == 1800000030.0 and progress.step == 120


def test_resume_clears_the_stop_for_the_ranks_that_do_not_report() -> None:
    ctx = TrainingContext(ENV, runner=Slurm(squeue(TAG)))
    ctx.request_stop()
    ctx.resume()
    assert not ctx.stop_requested and ctx.grace_left_s == float("inf")


def test_ready_without_a_notice_sends_nothing() -> None:
    slurm = Slurm(squeue("railgang:class=3"))
    assert not TrainingContext(ENV, runner=slurm).ready_for_resize(1)
    assert all(c[0] != "scontrol" for c in slurm.calls)


@pytest.mark.parametrize("bad", ["ready=0", "ready=-5", "ready=1e300", "ready=nan", "ready=x"])
def test_a_hostile_ready_field_is_refused_in_one_line(bad: str) -> None:
    with pytest.raises(ValueError, match="ready"):
        read_progress(f"rg-progress:step=1,sps=1,t=5,{bad}")


def test_ready_round_trips() -> None:
    p = Progress(step=3, sps=1.5, t=7, ready=1800000030.0)
    assert read_progress(format_progress(p)) == p


def test_the_rendezvous_is_the_batch_host_and_the_job_id_and_does_not_move_with_a_shrink() -> None:
    before = TrainingContext(ENV, runner=Slurm(squeue(TAG))).rendezvous()
    after = TrainingContext(ENV, runner=Slurm(squeue("railgang:class=3", nodes="n[01-02]"))).rendezvous()
    assert before == after and before.endpoint == "n01:29442" and before.id == "42"
    assert before.torchrun_args(1, 4) == ["--rdzv-backend=c10d", "--rdzv-endpoint=n01:29442",
                                          "--rdzv-id=42", "--nnodes=1:4"]


@pytest.mark.parametrize(("host", "env", "want"), [
    ("n07", {}, "n07"),
    (None, {"SLURM_JOB_NODELIST": "n[03-04]"}, "n03"),  # Slurm's batch host: the first node
    ("evil host;rm", {"SLURM_JOB_NODELIST": "n[03-04]", "SLURMD_NODENAME": "n04"}, "n03"),
    ("evil host;rm", {"SLURM_JOB_NODELIST": "bad[", "SLURMD_NODENAME": "n04"}, "n04"),
    (None, {}, "localhost"),
])
def test_the_rendezvous_host_falls_back_safely(host: str | None, env: dict[str, str], want: str) -> None:
    assert rendezvous("7", env, host).host == want


def test_the_port_can_be_chosen_and_a_bad_one_is_ignored() -> None:
    assert rendezvous("7", {"RAILGANG_RDZV_PORT": "31000"}, "n01").port == 31000
    assert rendezvous("7", {"RAILGANG_RDZV_PORT": "80"}, "n01").port == 29407


@pytest.mark.parametrize(("rule", "replicas", "per", "total", "lr"), [
    ("keep_global", 4, 64, 256, 0.1), ("keep_global", 2, 128, 256, 0.1),
    ("keep_global", 3, 86, 258, 0.1 * 258 / 256),  # rounded up: the lr follows the real batch
    ("linear", 2, 64, 128, 0.05), ("linear", 8, 64, 512, 0.2),
    ("sqrt", 1, 64, 64, 0.05),
])
def test_the_batch_rule(rule: str, replicas: int, per: int, total: int, lr: float) -> None:
    got = scale_batch(replicas, base_replicas=4, base_global_batch=256, base_lr=0.1, rule=rule)
    assert (got.per_replica_batch, got.global_batch) == (per, total)
    assert got.lr == pytest.approx(lr)


def test_an_unknown_rule_is_one_line() -> None:
    with pytest.raises(ValueError, match="keep_global, linear, sqrt"):
        scale_batch(2, base_replicas=4, base_global_batch=256, base_lr=0.1, rule="cubic")


def test_the_context_scales_from_its_requested_size_to_the_size_now() -> None:
    ctx = TrainingContext(ENV, runner=Slurm(squeue("railgang:class=3", nodes="n[01-02]")))
    got = ctx.scale_batch(256, 0.1, rule="linear")
    assert (got.per_replica_batch, got.global_batch) == (64, 128) and got.lr == pytest.approx(0.05)
