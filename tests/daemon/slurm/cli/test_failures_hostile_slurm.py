"""The failure responder against hostile input on the real Slurm 22.05 cluster (issue 38 rows 1
and 5; docs/security.md, docs/failures.md): a user's requeue does not undo an admin's drain, an
admin's drain survives its node going DOWN, and an operator's reservation named like a burn-in
one survives a daemon restart.

The responder runs in the CLI backend as a daemon would (``CliBackend(failures=...)``, one
``snapshot`` per cycle); the jobs are a plain user's (``tenant``), the drain and the reservation
root's. Each test puts its node back as it found it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator

import pytest

from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.detect import Fault
from railgang.daemon.slurm.cli import CliBackend
from railgang.daemon.slurm.cli.records import parse_sinfo
from railgang.devcluster.cluster import DevCluster
from railgang.devcluster.processes import is_running
from tests.daemon.failures.harness import BackendCycle
from tests.support.slurm import job_fields, sl, tenant
from tests.support.slurmd_timeout import slurmd_timeout

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

MAINT = "maint: replace PSU"


def responder(cluster: DevCluster, flaky_count: int = 3) -> BackendCycle:
    """A daemon's backend and its failure step (no heartbeat: nothing is leased, the user's jobs
    start on their own), ``flaky_count`` kills on a node make it flaky; ``snapshot`` runs a
    cycle up to the core (observe, the failure step, its actions carried out)."""
    cluster.spec.heartbeat_file.unlink(missing_ok=True)
    settings = FailureSettings(flaky_count=flaky_count, burn_in_command="sleep 1")
    return BackendCycle(CliBackend(SlurmSettings(conf=cluster.spec.slurm_conf, lease_s=600,
                                                 resize_grace_s=2), failures=settings), settings)


def node_line(cluster: DevCluster, node: str) -> tuple[str, str]:
    """(state as sinfo prints it, reason) of ``node``."""
    out = sl(cluster, "sinfo", "-h", "-N", "-n", node, "-o", "%T|%E").stdout.strip()
    state, _, reason = out.partition("|")
    return state, reason


def wait(ok: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.fixture
def n14(slurm_cluster: DevCluster) -> Iterator[str]:
    node = "n14"
    try:
        yield node
    finally:
        sl(slurm_cluster, "scontrol", "delete", f"ReservationName=railgang_burnin_{node}", check=False)
        sl(slurm_cluster, "scancel", "-n", f"railgang-burnin-{node}", check=False)
        sl(slurm_cluster, "scontrol", "update", f"nodename={node}", "State=RESUME", check=False)


def test_a_users_requeue_does_not_undo_an_admins_drain(slurm_cluster: DevCluster, n14: str) -> None:
    """Row 1: three jobs pinned to a node, an admin drains it, the owner requeues them. Not a
    node failure: the admin's reason stays, the node stays drained, no burn-in, and the owner's
    hinted jobs are not marked ``after_fault`` (no jump to the head of their class)."""
    user = tenant(slurm_cluster)
    backend = responder(slurm_cluster)
    jobs = [sl(slurm_cluster, "sbatch", "--parsable", f"--nodelist={n14}", "--account=team-a",
               "--gres=gpu:2", "--output=/dev/null", "--comment=rg:parallel=tp2;class=2",
               "--wrap=sleep 600", user=user).stdout.strip().split(";")[0] for _ in range(3)]
    try:
        wait(lambda: all(job_fields(slurm_cluster, j)["JobState"] == "RUNNING" for j in jobs),
             f"jobs {jobs} to run on {n14}")
        snap = backend.snapshot(time.time())  # the responder sees them run
        assert set(jobs) <= set(snap.running), sorted(snap.running)
        sl(slurm_cluster, "scontrol", "update", f"nodename={n14}", "State=DRAIN", f"Reason={MAINT}")
        sl(slurm_cluster, "scontrol", "requeue", ",".join(jobs), user=user)
        wait(lambda: all(job_fields(slurm_cluster, j)["Restarts"] == "1" for j in jobs),
             "the owner's requeue")
        faults: list[Fault] = []
        after_fault: set[str] = set()
        failures = backend.failures
        assert failures is not None
        for _ in range(6):
            snap = backend.snapshot(time.time())
            faults += failures.last.faults
            after_fault |= {j.job_id for j in snap.pending if j.state.after_fault}
            time.sleep(0.7)
        state, reason = node_line(slurm_cluster, n14)
        assert reason == MAINT and state.startswith("drain"), (state, reason)
        assert sl(slurm_cluster, "squeue", "-h", "-t", "all", "-n", f"railgang-burnin-{n14}").stdout == ""
        assert f"railgang_burnin_{n14}" not in sl(slurm_cluster, "scontrol", "show", "reservation",
                                                   check=False).stdout
        assert faults == [] and after_fault == set(), (faults, after_fault)
        assert failures.held_out() == frozenset()
    finally:
        sl(slurm_cluster, "scancel", *jobs, check=False)


def test_an_operators_reservation_named_like_a_burn_in_is_not_adopted(
        slurm_cluster: DevCluster, caplog: pytest.LogCaptureFixture) -> None:
    """Row 5: an operator's MAINT reservation ``railgang_burnin_n12`` (Users=root, no
    IGNORE_JOBS) is not one railgang made: a restarted daemon leaves it and its node alone, and
    says so once."""
    node, name = "n12", "railgang_burnin_n12"
    sl(slurm_cluster, "scontrol", "create", "reservation", f"ReservationName={name}",
       f"Nodes={node}", "StartTime=now", "Duration=60", "Users=root", "Flags=MAINT")
    try:
        backend = responder(slurm_cluster)  # a fresh daemon: adopts what Slurm shows once
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                backend.snapshot(time.time())
                time.sleep(0.5)
        shown = sl(slurm_cluster, "scontrol", "show", "reservation", name, check=False).stdout
        assert f"ReservationName={name}" in shown and "IGNORE_JOBS" not in shown, shown
        assert sl(slurm_cluster, "squeue", "-h", "-t", "all", "-n", f"railgang-burnin-{node}").stdout == ""
        state, reason = node_line(slurm_cluster, node)
        assert "drain" not in state and not reason.startswith("railgang"), (state, reason)
        assert backend.failures is not None and backend.failures.held_out() == frozenset()
        warned = [r.getMessage() for r in caplog.records if name in r.getMessage()]
        assert len(warned) == 1, warned
    finally:
        sl(slurm_cluster, "scontrol", "delete", f"ReservationName={name}", check=False)
        sl(slurm_cluster, "scancel", "-n", f"railgang-burnin-{node}", check=False)
        sl(slurm_cluster, "scontrol", "update", f"nodename={node}", "State=RESUME", check=False)


def restart_slurmd(cluster: DevCluster, node: str, pid: int) -> bool:
    """Start ``node``'s killed slurmd (``pid``) again; False: it is no longer killed."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    cluster.start_slurmd(node)
    return False


def test_an_admins_drain_survives_its_node_going_down(slurm_cluster: DevCluster) -> None:
    """Row 1, second half: root drains n15, then its slurmd dies. Slurm keeps root's reason on
    the DOWN node and requeues the user's job; with one kill enough to make a node flaky, the
    responder still counts nothing there, never drains over the reason, and once the slurmd is
    back (the node is DRAINED again) never resumes it. On the dev cluster SlurmUser is root, so
    only the reason's words tell it from Slurm's own."""
    with slurmd_timeout(slurm_cluster, 20) as timeout_s:  # DOWN sooner; the rest is the same
        drain_survives_down(slurm_cluster, timeout_s)


def drain_survives_down(slurm_cluster: DevCluster, timeout_s: int) -> None:
    node, user = "n15", tenant(slurm_cluster)
    backend = responder(slurm_cluster, flaky_count=1)
    failures = backend.failures
    assert failures is not None
    rec = slurm_cluster.procs.get(f"slurmd-{node}")
    assert rec is not None and is_running(rec), f"slurmd of {node} is not running"
    job = sl(slurm_cluster, "sbatch", "--parsable", f"--nodelist={node}", "--account=team-a",
             "--gres=gpu:2", "--output=/dev/null", "--wrap=sleep 600",
             user=user).stdout.strip().split(";")[0]
    killed = False
    try:
        wait(lambda: job_fields(slurm_cluster, job)["JobState"] == "RUNNING", f"job {job} to run")
        backend.snapshot(time.time())  # the responder sees it run on the node
        sl(slurm_cluster, "scontrol", "update", f"nodename={node}", "State=DRAIN", f"Reason={MAINT}")
        os.kill(rec.pid, signal.SIGKILL)
        killed = True
        faults: list[Fault] = []

        def cycle() -> bool:
            backend.snapshot(time.time())
            faults.extend(failures.last.faults)
            time.sleep(1.0)
            return job_fields(slurm_cluster, job)["Restarts"] == "1"

        wait(cycle, f"Slurm to requeue job {job} off the dead {node}", timeout_s=2 * timeout_s + 40)
        # the daemon's own reader: 22.05 lists "nodes", 24.11+ "sinfo" entries with --Node
        shown = next(n for n in parse_sinfo(sl(slurm_cluster, "sinfo", "--json", "--Node").stdout)[0]
                     if n.name == node)
        print(f"{node} down: {shown}")
        assert shown.state is NodeState.DOWN, shown
        for _ in range(3):
            cycle()
        # 24.11 appends " : Not responding" to the admin's reason itself; railgang writes none
        assert node_line(slurm_cluster, node)[1].startswith(MAINT)
        killed = restart_slurmd(slurm_cluster, node, rec.pid)
        wait(lambda: node_line(slurm_cluster, node)[0] == "drained", f"{node} back, drained",
             timeout_s=60)
        for _ in range(4):
            cycle()
        state, reason = node_line(slurm_cluster, node)
        assert state == "drained" and reason.startswith(MAINT) and "railgang" not in reason, reason
        assert [f for f in faults if f.node == node] == [], faults
        assert failures.held_out() == frozenset()
        assert sl(slurm_cluster, "squeue", "-h", "-t", "all", "-n", f"railgang-burnin-{node}").stdout == ""
    finally:
        sl(slurm_cluster, "scancel", job, check=False)
        if killed:
            restart_slurmd(slurm_cluster, node, rec.pid)
        sl(slurm_cluster, "scontrol", "delete", f"ReservationName=railgang_burnin_{node}", check=False)
        sl(slurm_cluster, "scancel", "-n", f"railgang-burnin-{node}", check=False)
        wait(lambda: node_line(slurm_cluster, node)[0] in ("drained", "idle", "draining"),
             f"{node}'s slurmd back", timeout_s=60)
        sl(slurm_cluster, "scontrol", "update", f"nodename={node}", "State=RESUME", check=False)
