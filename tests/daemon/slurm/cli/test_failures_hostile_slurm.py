"""The failure responder against hostile input on the real Slurm 22.05 cluster (issue 38 rows 1
and 5; docs/security.md, docs/failures.md): a user's requeue does not undo an admin's drain, and
an operator's reservation named like a burn-in one survives a daemon restart.

The responder runs in the CLI backend as a daemon would (``CliBackend(failures=...)``, one
``snapshot`` per cycle); the jobs are a plain user's (``tenant``), the drain and the reservation
root's. Each test puts its node back as it found it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pytest

from railgang.daemon.config import SlurmSettings
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.detect import Fault
from railgang.daemon.slurm.cli import CliBackend
from railgang.devcluster.cluster import DevCluster
from tests.support.slurm import job_fields, sl, tenant

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

MAINT = "maint: replace PSU"


def responder(cluster: DevCluster) -> CliBackend:
    """A daemon's backend with the failure responder on (no heartbeat: nothing is leased, the
    user's jobs start on their own), three kills on a node make it flaky."""
    cluster.spec.heartbeat_file.unlink(missing_ok=True)
    return CliBackend(SlurmSettings(conf=cluster.spec.slurm_conf, lease_s=600, resize_grace_s=2),
                      failures=FailureSettings(flaky_count=3, burn_in_command="sleep 1"))


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
