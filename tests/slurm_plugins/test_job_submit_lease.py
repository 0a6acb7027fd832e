"""job_submit.lua's begin-time lease on the real cluster: fail open without any railgang process.

The lease length comes from the heartbeat file's second field (the daemon's ``slurm.lease_s``),
so these tests use short leases without restarting slurmctld.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli import CliBackend, write_heartbeat
from railgang.devcluster.cluster import DevCluster
from tests.support.slurm import job_fields, sl, tenant

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

LEASE_S = 12
# Slurm runs a job whose begin time passed on a later scheduling pass (22 s seen in the notes;
# sched/backfill's interval is 30 s): the bound a dead daemon's waiting jobs start within
SCHEDULING_PASS_S = 60
# sdiag: "Main schedule statistics (microseconds):\n\tLast cycle: ...\n\tMax cycle: ...\n\tTotal cycles: 33"
_MAIN_CYCLES = re.compile(r"Main schedule statistics.*?Total cycles:\s*(\d+)", re.S)


@pytest.fixture
def jobs(slurm_cluster: DevCluster) -> Iterator[list[str]]:
    submitted: list[str] = []
    yield submitted
    if submitted:
        sl(slurm_cluster, "scancel", *submitted, check=False)
    slurm_cluster.spec.heartbeat_file.unlink(missing_ok=True)


def submit(cluster: DevCluster, tmp_path: Path, jobs: list[str], *opts: str, user: str | None = None) -> str:
    res = sl(cluster, "sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null",
             "--account=team-a", "--gres=gpu:2", "--comment=rg:parallel=tp2;class=3", *opts,
             "--wrap=sleep 2", user=user)
    jobs.append(res.stdout.strip().split(";")[0])
    assert "lease" in res.stderr and "railgang explain" in res.stderr
    return jobs[-1]


def wait_started(cluster: DevCluster, job: str, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = job_fields(cluster, job).get("JobState")
        if state in ("RUNNING", "COMPLETING", "COMPLETED"):
            return time.time()
        time.sleep(1)
    raise AssertionError(f"job {job} did not start within {timeout_s:.0f}s: {job_fields(cluster, job)}")


def test_dead_daemon_strands_no_job(slurm_cluster: DevCluster, tmp_path: Path, jobs: list[str]) -> None:
    """Leased while the heartbeat is fresh; nobody renews; plain Slurm runs them after the lease."""
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), LEASE_S)
    submitted = time.time()
    leased = [submit(slurm_cluster, tmp_path, jobs) for _ in range(3)]
    for job in leased:
        fields = job_fields(slurm_cluster, job)
        assert fields["JobState"] == "PENDING" and fields["Reason"] in ("BeginTime", "None")
    slurm_cluster.spec.heartbeat_file.unlink()  # the daemon is gone (kill -9: nothing else to do)
    starts = [wait_started(slurm_cluster, job, LEASE_S + SCHEDULING_PASS_S) for job in leased]
    assert all(t >= submitted + LEASE_S - 2 for t in starts)  # they did wait out their lease


def main_cycles(cluster: DevCluster) -> int:
    """How many main scheduling passes slurmctld has run (sdiag's "Main schedule statistics")."""
    out = sl(cluster, "sdiag").stdout
    m = _MAIN_CYCLES.search(out)
    assert m is not None, out
    return int(m.group(1))


def a_scheduling_pass(cluster: DevCluster, tmp_path: Path, jobs: list[str],
                      meanwhile: Callable[[], None] = lambda: None) -> None:
    """Returns once slurmctld ran a main scheduling pass over every waiting job, begun after this
    call. A plain job's submission queues one now, rather than on the 30 s backfill timer (the
    timer's own pass is test_dead_daemon_strands_no_job's); ``meanwhile`` runs every second."""
    before = main_cycles(cluster)
    res = sl(cluster, "sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null",
             "--account=team-a", "-N1", "--wrap=true")  # no rg: tag: never leased
    jobs.append(res.stdout.strip().split(";")[0])
    deadline = time.monotonic() + 30
    while main_cycles(cluster) <= before:
        assert time.monotonic() < deadline, "no main scheduling pass within 30 s of a submission"
        meanwhile()
        time.sleep(1)


def test_renewal_keeps_jobs_waiting(slurm_cluster: DevCluster, tmp_path: Path, jobs: list[str]) -> None:
    backend = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=LEASE_S))
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), LEASE_S)
    leased = [submit(slurm_cluster, tmp_path, jobs) for _ in range(3)]

    def renew() -> None:
        write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), LEASE_S)
        calls = backend.runner.calls
        assert backend.renew_leases(leased, time.time()) == {}
        assert backend.runner.calls == calls + 1

    until = time.monotonic() + 2 * LEASE_S  # past the first lease
    while time.monotonic() < until:
        renew()
        time.sleep(2)
    # a scheduling pass past the first lease: it would start them had the renewals not held them
    a_scheduling_pass(slurm_cluster, tmp_path, jobs, meanwhile=renew)
    renew()
    for job in leased:
        assert job_fields(slurm_cluster, job)["JobState"] == "PENDING"
    # the daemon dies now: the last renewal's lease runs out and Slurm takes over
    slurm_cluster.spec.heartbeat_file.unlink()
    ends = max(time.mktime(time.strptime(job_fields(slurm_cluster, j)["EligibleTime"],
                                         "%Y-%m-%dT%H:%M:%S")) for j in leased)
    while time.time() <= ends + 1:
        time.sleep(0.5)
    a_scheduling_pass(slurm_cluster, tmp_path, jobs)
    for job in leased:
        wait_started(slurm_cluster, job, LEASE_S + SCHEDULING_PASS_S)


def test_stale_heartbeat_gives_no_lease(slurm_cluster: DevCluster, tmp_path: Path, jobs: list[str]) -> None:
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time() - 3600, LEASE_S)
    res = sl(slurm_cluster, "sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null",
             "--account=team-a", "--gres=gpu:2", "--comment=rg:parallel=tp2", "--wrap=sleep 1")
    jobs.append(res.stdout.strip())
    assert "lease" not in res.stderr
    wait_started(slurm_cluster, jobs[-1], SCHEDULING_PASS_S)


def test_owner_cannot_end_the_lease(slurm_cluster: DevCluster, tmp_path: Path, jobs: list[str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    user = tenant(slurm_cluster)
    tmp_path.chmod(0o777)
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), 600)
    job = submit(slurm_cluster, tmp_path, jobs, user=user)
    eligible = job_fields(slurm_cluster, job)["EligibleTime"]
    for change in ("StartTime=now", "Priority=100000"):
        res = sl(slurm_cluster, "scontrol", "update", f"jobid={job}", change, check=False, user=user)
        assert res.returncode != 0 and "Access/permission denied" in res.stderr
    # other changes stay the owner's to make; the lease is untouched
    assert sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "TimeLimit=10", user=user).returncode == 0
    fields = job_fields(slurm_cluster, job)
    assert fields["EligibleTime"] == eligible and fields["TimeLimit"] == "00:10:00"
    # root (the daemon) ends the lease
    sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "StartTime=now")
    wait_started(slurm_cluster, job, 30)
