"""Apply planning against the captured 22.05 observation: which commands, how many, whose refusal.

The runner's launcher is scripted with stderr lines Slurm 22.05 printed for the same commands;
the real effects are covered by test_cli_backend_slurm.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from railgang.daemon.core.model.actions import (
    DrainNode,
    Preempt,
    Resize,
    SetPriority,
    Start,
    TagNode,
)
from railgang.daemon.slurm.cli.apply import ApplyConfig, apply_actions, due, finish_due
from railgang.daemon.slurm.cli.parse import parse_tag
from railgang.daemon.slurm.cli.runner import SlurmRunner
from tests.daemon.slurm.cli.capture import NOW, observation


class Recorder:
    def __init__(self, stderr: Mapping[str, str] | None = None) -> None:
        self.stderr = dict(stderr or {})  # first argv word -> stderr to answer with (rc 1)
        self.calls: list[tuple[tuple[str, ...], str | None]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        self.calls.append((tuple(argv), stdin))
        err = self.stderr.get(argv[0], "")
        return (1 if err else 0), "", err


EIGHT = tuple(range(8))


def test_one_scontrol_for_all_job_updates_and_one_scancel() -> None:
    rec = Recorder()
    results = apply_actions(SlurmRunner(exec_fn=rec), observation(), [
        Start("11", {"n09": EIGHT, "n10": EIGHT, "n11": EIGHT, "n12": EIGHT}, 2),
        SetPriority("12", 500),
        Preempt("9", grace_s=30),
        Resize("10", 1, {"n05": (0, 1, 2, 3)}, 1),
    ], NOW, ApplyConfig())
    assert [r.ok for r in results] == [True] * 4 and results[3].detail == "no change"
    assert [c[0][0] for c in rec.calls] == ["scontrol", "scancel"]
    script = (rec.calls[0][1] or "").splitlines()
    assert script[0].startswith("update jobid=11 NumNodes=4-4 ReqNodeList=n[09-12] TresPerJob= "
                                "Gres=gpu:8 StartTime=now AdminComment=")  # + ckpt= (advice)
    assert script[1] == "update jobid=12 Priority=500"
    mark = parse_tag(script[2].split("AdminComment=", 1)[1])
    assert mark is not None and mark.preempt is not None and mark.preempt.deadline == NOW + 30
    assert rec.calls[1][0] == ("scancel", "--signal=USR1", "--full", "9")


def test_refusals_are_mapped_to_their_actions() -> None:
    rec = Recorder({"scontrol": "Invalid job id specified for job 999\n"})
    results = apply_actions(SlurmRunner(exec_fn=rec), observation(), [
        SetPriority("12", 5), SetPriority("999", 5), Start("11", {"n16": EIGHT}, 1),
        Start("9", {"n03": EIGHT}, 1), Preempt("8", 10), Resize("9", 1, {"n01": (0, 1, 2, 3)}, 2),
    ], NOW, ApplyConfig())
    assert [r.ok for r in results] == [True, False, False, False, False, False]
    assert results[1].detail == "Invalid job id specified (job 999)"
    assert results[2].detail == "node n16 is drain; it takes no new work"
    assert results[3].detail == "job 9 is RUNNING, not pending"
    assert "not a railgang job" in results[4].detail
    assert "shrinks by whole nodes only" in results[5].detail


def test_shrink_keeps_the_batch_host() -> None:
    rec = Recorder()
    [res] = apply_actions(SlurmRunner(exec_fn=rec), observation(),
                          [Resize("9", 1, {"n02": EIGHT}, 2)], NOW, ApplyConfig())
    assert res.ok and "kept batch host n01" in res.detail
    assert rec.calls[0][1] == "update jobid=9 NodeList=n01\n"


def test_node_actions() -> None:
    rec = Recorder()
    results = apply_actions(SlurmRunner(exec_fn=rec), observation(), [
        DrainNode("n03", "lame IB link"), TagNode("n15", "lame"), TagNode("n03", "hot"),
        TagNode("n03", "bad,tag")], NOW, ApplyConfig())
    assert [r.ok for r in results] == [True, True, True, False]
    assert results[1].detail == "already tagged"
    assert [c[0] for c in rec.calls] == [
        ("scontrol", "update", "nodename=n03", "State=DRAIN", "Reason=railgang: lame IB link"),
        ("scontrol", "update", "nodename=n03", "AvailableFeatures=rg_hot", "ActiveFeatures=rg_hot")]


def test_grow_then_requeue_when_due() -> None:
    rec = Recorder()
    obs = observation()
    [res] = apply_actions(SlurmRunner(exec_fn=rec), obs,
                          [Resize("10", 2, {"n05": (0, 1, 2, 3), "n06": (0, 1, 2, 3)}, 1)], NOW,
                          ApplyConfig(resize_grace_s=20))
    assert res.ok and "grow by requeue" in res.detail
    comment = (rec.calls[0][1] or "").split("AdminComment=", 1)[1].strip()
    assert comment.endswith(f"grow={NOW + 20:.0f}@0@n[05-06]x4")
    # the next observation reads the mark back from Slurm; after the grace it is due
    import dataclasses

    marked = dataclasses.replace(obs.jobs["10"], admin_comment=comment, tag=parse_tag(comment))
    obs2 = dataclasses.replace(obs, jobs={**obs.jobs, "10": marked})
    assert due(obs2, NOW + 5) == ([], [], [])
    assert [r.job_id for r in due(obs2, NOW + 21)[1]] == ["10"]
    rec2 = Recorder()
    notes = finish_due(SlurmRunner(exec_fn=rec2), obs2, NOW + 21, ApplyConfig())
    assert rec2.calls[0][0] == ("scontrol", "requeue", "10")
    assert rec2.calls[1][1] == ("update jobid=10 NumNodes=2-2 ReqNodeList=n[05-06] TresPerJob= "
                                "Gres=gpu:4 StartTime=now\n")
    assert [f.line for f in notes] == ["job 10: growing by requeue, pinned to its new size"]
    # the core asks for the same grow again next cycle (it sees the job at its old size until
    # the requeue): nothing is sent, so the deadline is not pushed out and the requeue comes
    rec3 = Recorder()
    [again] = apply_actions(SlurmRunner(exec_fn=rec3), obs2,
                            [Resize("10", 2, {"n05": (0, 1, 2, 3), "n06": (0, 1, 2, 3)}, 1)], NOW + 1,
                            ApplyConfig(resize_grace_s=20))
    assert again.ok and again.detail == f"already growing: requeue due at {NOW + 20:.0f}"
    assert rec3.calls == []


def test_a_job_the_checkpoint_signal_killed_is_requeued_at_once() -> None:
    import dataclasses

    from railgang.daemon.slurm.cli.apply import died_of_the_signal

    obs = observation()
    mark = "railgang:tp=8,pp=1,dp=1;class=3;preempt={:.0f}@{}"
    run = obs.jobs["10"]

    def ended(comment: str, sig: int, restarts: int = 0) -> object:
        return dataclasses.replace(run, state="FAILED", admin_comment=comment,
                                   tag=parse_tag(comment), exit_signal=sig, restarts=restarts)

    killed = ended(mark.format(NOW + 600, 0), 10)
    others = [ended(mark.format(NOW + 600, 0), 15),  # cancelled by someone: not ours to revive
              ended("railgang:tp=8,pp=1,dp=1;class=3", 10),  # never signalled by railgang
              ended(mark.format(NOW + 600, 0), 10, restarts=1)]  # the mark of an earlier run
    assert died_of_the_signal([killed, *others]) == [killed]
    rec = Recorder()
    notes = finish_due(SlurmRunner(exec_fn=rec), obs, NOW + 5, ApplyConfig(),
                       ended=[killed, *others])  # long before the grace ends
    assert rec.calls[0][0] == ("scontrol", "requeue", "10")
    assert [f.line for f in notes] == ["job 10: preempted, requeued"]


def test_the_exit_signal_reads_both_squeue_json_forms() -> None:
    from railgang.daemon.slurm.cli.records import exit_signal

    assert exit_signal({"exit_code": 10}) == 10  # 22.05: a wait status, killed by SIGUSR1
    assert exit_signal({"exit_code": 256}) == 0  # exited 1
    assert exit_signal({"exit_code": {"status": ["SIGNALED"], "signal": {
        "id": {"set": True, "infinite": False, "number": 10}, "name": "USR1"}}}) == 10
    assert exit_signal({"exit_code": {"status": ["SUCCESS"], "signal": {
        "id": {"set": False, "number": 0}}}}) == 0
    assert exit_signal({}) == 0 and exit_signal({"exit_code": "x"}) == 0
    # hostile squeue output: no traceback, just "not killed by a signal"
    for bad in (float("inf"), float("nan"), -10, True, [10], None, 10.5, "10"):
        assert exit_signal({"exit_code": bad}) == 0
        assert exit_signal({"exit_code": {"signal": {"id": bad}}}) == 0
    assert exit_signal({"exit_code": 1e300}) == 127  # clamped, never an overflow
