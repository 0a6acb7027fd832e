"""Runner retry rule and error typing; the argument lists the backend sends.

The runner's process launcher is injectable; these tests feed it scripted exit codes and
stderr lines copied from Slurm 22.05 clients to pin which failures are retried. The real
processes are exercised by the integration tests (tests/daemon/slurm/cli/test_cli_backend_slurm.py).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

import pytest

from railgang.daemon.slurm.cli import commands as cmd
from railgang.daemon.slurm.cli.runner import SlurmRunner, is_transient, last_line, read_key
from railgang.errors import SlurmCommandError, SlurmError


class Scripted:
    """Answers each call with the next (rc, stderr) pair, recording argv and stdin."""

    def __init__(self, *answers: tuple[int, str] | type[BaseException]) -> None:
        self.answers = list(answers)
        self.seen: list[tuple[tuple[str, ...], str | None, str | None]] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        self.seen.append((tuple(argv), env.get("SLURM_CONF"), stdin))
        answer = self.answers.pop(0)
        if isinstance(answer, type):
            raise subprocess.TimeoutExpired(list(argv), timeout_s)
        rc, err = answer
        return rc, "out" if rc == 0 else "", err


def runner(exec_fn: Scripted, retries: int = 2) -> tuple[SlurmRunner, list[float]]:
    sleeps: list[float] = []
    return SlurmRunner(conf=None, retries=retries, backoff_s=0.5, exec_fn=exec_fn,
                       sleep=sleeps.append), sleeps


BUSY = "squeue: error: Unable to contact slurm controller (connect failure)"
REFUSED = "Invalid job id specified for job 99999"


def test_transient_failure_is_retried_with_backoff() -> None:
    fake = Scripted((1, BUSY), (1, BUSY), (0, ""))
    r, sleeps = runner(fake)
    res = r.run(["squeue", "--json"])
    assert res.ok and res.attempts == 3 and r.calls == 3
    assert sleeps == [0.5, 1.0]


def test_refusal_is_never_retried() -> None:
    fake = Scripted((1, REFUSED))
    r, sleeps = runner(fake)
    res = r.attempt(["scontrol", "update", "jobid=99999", "Priority=5"])
    assert not res.ok and res.attempts == 1 and sleeps == [] and res.message == REFUSED
    strict, _ = runner(Scripted((1, REFUSED)))
    with pytest.raises(SlurmCommandError) as info:
        strict.run(["scontrol", "x"])
    assert info.value.rc == 1 and info.value.stderr == REFUSED


def test_unreachable_after_retries_is_a_typed_error() -> None:
    r, sleeps = runner(Scripted((1, BUSY), (1, BUSY), (1, BUSY)))
    with pytest.raises(SlurmCommandError) as info:
        r.attempt(["sinfo", "--json"])
    assert isinstance(info.value, SlurmError) and info.value.command == ["sinfo", "--json"]
    assert "Unable to contact slurm controller" in str(info.value) and len(sleeps) == 2


def test_timeout_is_transient_then_error() -> None:
    r, _ = runner(Scripted(subprocess.TimeoutExpired, (0, "")))
    assert r.run(["squeue", "--json"]).attempts == 2
    r2, _ = runner(Scripted(subprocess.TimeoutExpired), retries=0)
    with pytest.raises(SlurmCommandError, match="timed out"):
        r2.run(["squeue", "--json"])


class Slow:
    """A command that needs ``needs_s`` seconds: every try given less times out."""

    def __init__(self, needs_s: float) -> None:
        self.needs_s = needs_s
        self.timeouts: list[float] = []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        self.timeouts.append(timeout_s)
        if timeout_s < self.needs_s:
            raise subprocess.TimeoutExpired(list(argv), timeout_s)
        return 0, "out", ""


def test_a_read_that_times_out_gets_twice_the_time_and_keeps_it() -> None:
    """squeue --json of 51,000 jobs on 26.05 outlasted the 30 s default on every try, so no
    cycle completed: a read's retry doubles the time, and later reads start from what worked."""
    slow = Slow(needs_s=45.0)
    r, _ = runner(slow)
    r.timeout_s = 30.0
    assert r.run(["squeue", "--json", "--states=all"]).ok
    assert slow.timeouts == [30.0, 60.0]
    assert r.run(["squeue", "-O", "JobId", "--jobs=1,2"]).ok  # the same program's reads
    assert slow.timeouts == [30.0, 60.0, 60.0]
    assert r.run(["sinfo", "--json"]).ok and slow.timeouts[3:] == [30.0, 60.0]

    longer = Slow(needs_s=150.0)  # past every try of one call: the next call starts at 120 s
    r2, _ = runner(longer)
    r2.timeout_s = 30.0
    with pytest.raises(SlurmCommandError, match="timed out after 120s"):
        r2.run(["squeue", "--json"])
    assert r2.run(["squeue", "--json"]).ok
    assert longer.timeouts == [30.0, 60.0, 120.0, 120.0, 240.0]
    hung = Slow(needs_s=1e9)  # slurmctld stuck: bounded by the retries and 8x the timeout
    r3, _ = runner(hung)
    r3.timeout_s = 30.0
    for _ in range(3):
        with pytest.raises(SlurmCommandError, match="timed out"):
            r3.run(["squeue", "--json"])
    assert hung.timeouts == [30.0, 60.0, 120.0, 120.0, 240.0, 240.0, 240.0, 240.0, 240.0]
    assert r3.read_timeouts == {("squeue",): 240.0}


def test_a_write_that_times_out_is_retried_with_the_same_time() -> None:
    """A write's cost does not grow with the queue: when it times out slurmctld is stuck."""
    slow = Slow(needs_s=45.0)
    r, _ = runner(slow)
    r.timeout_s = 30.0
    with pytest.raises(SlurmCommandError, match="timed out after 30s"):
        r.attempt(["scontrol", "update", "jobid=5", "StartTime=now"])
    assert slow.timeouts == [30.0, 30.0, 30.0] and not r.read_timeouts


def test_a_real_slow_process_is_read_on_its_longer_retry() -> None:
    r = SlurmRunner(conf=None, timeout_s=0.3, retries=1, backoff_s=0.0)
    res = r.run(["bash", "-c", "sleep 0.45; echo done"])
    assert res.stdout == "done\n" and res.attempts == 2 and r.read_timeouts == {("bash",): 0.6}


@pytest.mark.parametrize(("argv", "key"), [
    (["squeue", "--json", "--states=all"], ("squeue",)),
    (["scontrol", "show", "topology"], ("scontrol", "show", "topology")),
    (["scontrol", "-o", "show", "reservation"], ("scontrol",)),
    (["sacct", "--json", "--jobs=1,2"], ("sacct",)),
])
def test_a_reads_timeout_is_kept_per_program_and_sub_command(argv: list[str],
                                                               key: tuple[str, ...]) -> None:
    assert read_key(argv) == key


def test_missing_binary_is_a_one_line_error() -> None:
    r = SlurmRunner(retries=3)
    with pytest.raises(SlurmCommandError, match="cannot run"):
        r.run(["/nonexistent/squeue", "--json"])
    assert r.calls == 1


def test_conf_and_stdin_are_passed() -> None:
    from pathlib import Path

    fake = Scripted((0, ""))
    r = SlurmRunner(conf=Path("/x/slurm.conf"), exec_fn=fake)
    r.run(["scontrol"], stdin="update jobid=1 Priority=5\n")
    assert fake.seen == [(("scontrol",), "/x/slurm.conf", "update jobid=1 Priority=5\n")]


@pytest.mark.parametrize(("stderr", "transient"), [
    (BUSY, True), ("slurm_load_jobs error: Socket timed out on send/recv operation", True),
    ("Zero Bytes were transmitted or received", True), (REFUSED, False),
    ("Requested node configuration is not available", False), ("Access/permission denied", False),
])
def test_is_transient(stderr: str, transient: bool) -> None:
    assert is_transient(stderr) is transient


def test_last_line() -> None:
    assert last_line("a\n\n b \n\n") == "b" and last_line("") == ""


def test_start_fields_equal_and_unequal() -> None:
    equal = {"n05": tuple(range(8)), "n06": tuple(range(8))}
    assert cmd.start_fields(equal) == ["NumNodes=2-2", "ReqNodeList=n[05-06]", "TresPerJob=",
                                       "Gres=gpu:8", "StartTime=now"]
    unequal = {"n07": (0, 1, 2, 3), "n08": (0, 1)}
    assert cmd.start_fields(unequal)[2:4] == ["TresPerNode=", "TresPerJob=gres:gpu:6"]


def test_lease_argvs_chunk() -> None:
    ids = [str(i) for i in range(1, 701)]
    argvs = cmd.lease_argvs(ids, 0.0, chunk=300)
    assert [len(a[2].removeprefix("jobid=").split(",")) for a in argvs] == [300, 300, 100]
    assert all(a[:2] == ["scontrol", "update"] and a[3].startswith("StartTime=") for a in argvs)


def test_failures_by_job() -> None:
    err = ("Invalid job id specified for job 99999\nAccess/permission denied for job 5\n"
           "scontrol: error: Could not load state information for job 7: Invalid job id specified\n")
    assert cmd.failures_by_job(err) == {"99999": "Invalid job id specified",
                                        "5": "Access/permission denied",
                                        "7": "Invalid job id specified"}


def test_names_are_validated() -> None:
    assert cmd.valid_job_id("123") and cmd.valid_job_id("12_3") and not cmd.valid_job_id("1;rm")
    assert cmd.valid_node("n01") and not cmd.valid_node("n01 x") and not cmd.valid_node("")
    assert cmd.valid_tag("lame_link") and not cmd.valid_tag("a,b")
    assert cmd.valid_tag("lame-link")  # the core's own tag (CycleConfig.lame_link_tag)
