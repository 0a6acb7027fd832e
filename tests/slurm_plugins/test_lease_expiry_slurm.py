"""Lease renewal by expiry on the real cluster (issue 17 item 4): a cycle sends slurmctld one
update per lease that ends soon and none for the others, and a job whose daemon died runs under
plain Slurm within the lease plus one scheduling pass of the daemon's last renewal."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli import CliBackend, write_heartbeat
from railgang.devcluster.cluster import DevCluster
from tests.slurm_plugins.test_job_submit_lease import SCHEDULING_PASS_S, submit, wait_started
from tests.support.slurm import job_fields, sl

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# sdiag: "REQUEST_UPDATE_JOB   ( 3001) count:12  ave_time:..." (the RPCs slurmctld served)
_UPDATES = re.compile(r"^\s*REQUEST_UPDATE_JOB\s+\(\s*\d+\)\s+count:(\d+)", re.M)


@pytest.fixture
def jobs(slurm_cluster: DevCluster) -> Iterator[list[str]]:
    submitted: list[str] = []
    yield submitted
    if submitted:
        sl(slurm_cluster, "scancel", *submitted, check=False)
    slurm_cluster.spec.heartbeat_file.unlink(missing_ok=True)


def update_rpcs(cluster: DevCluster) -> int:
    """REQUEST_UPDATE_JOB RPCs slurmctld has served since it started (or sdiag --reset)."""
    m = _UPDATES.search(sl(cluster, "sdiag").stdout)
    return int(m.group(1)) if m else 0


def eligible(cluster: DevCluster, job: str) -> float:
    return time.mktime(time.strptime(job_fields(cluster, job)["EligibleTime"], "%Y-%m-%dT%H:%M:%S"))


def test_a_cycle_renews_only_the_leases_that_end_soon(slurm_cluster: DevCluster, tmp_path: Path,
                                                      jobs: list[str]) -> None:
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), 600)
    held = [submit(slurm_cluster, tmp_path, jobs) for _ in range(5)]
    soon = held[:2]
    for job in soon:  # as if leased 580 s ago: 20 s left
        sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "StartTime=now+20")
    far = {job: eligible(slurm_cluster, job) for job in held[2:]}
    assert all(t > time.time() + 500 for t in far.values())
    backend = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600,
                                       lease_renew_before_s=60), read_shares=False)
    now = time.time()
    queue = [j.job_id for j in backend.snapshot(now).pending if j.job_id in held]
    assert sorted(queue) == sorted(held)
    due = backend.leases_due(queue, now)
    assert sorted(due) == sorted(soon)
    rpcs, calls = update_rpcs(slurm_cluster), backend.runner.calls
    assert backend.renew_leases(due, now) == {}
    # one process, and slurmctld served exactly one update per lease that ended soon
    assert backend.runner.calls == calls + 1 and update_rpcs(slurm_cluster) == rpcs + len(soon)
    for job in soon:
        assert now + 590 <= eligible(slurm_cluster, job) <= now + 601
    assert {job: eligible(slurm_cluster, job) for job in far} == far  # not touched


def test_a_dead_daemons_renewed_jobs_run_within_the_lease_and_one_pass(
        slurm_cluster: DevCluster, tmp_path: Path, jobs: list[str]) -> None:
    """Cycles every 2 s renew by expiry (12 s leases, renewed once under 6 s are left); no
    renewal sets a lease past now + 12 s; the daemon dies; plain Slurm runs the jobs within the
    lease plus one scheduling pass of that moment, not before the last lease it gave ended."""
    lease_s = 12
    backend = CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=lease_s,
                                       lease_renew_before_s=6), read_shares=False)
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), lease_s)
    held = [submit(slurm_cluster, tmp_path, jobs) for _ in range(3)]
    renewed = 0
    until = time.monotonic() + 2 * lease_s + 4  # past the first lease: renewals kept them waiting
    while time.monotonic() < until:
        now = time.time()
        write_heartbeat(slurm_cluster.spec.heartbeat_file, now, lease_s)
        queue = [j.job_id for j in backend.snapshot(now).pending if j.job_id in held]
        assert sorted(queue) == sorted(held)  # none ran natively while the daemon was alive
        due = backend.leases_due(queue, now)
        assert backend.renew_leases(due, now) == {}
        renewed += len(due)
        assert all(eligible(slurm_cluster, j) <= now + lease_s + 1 for j in held)
        time.sleep(2)
    assert renewed >= 2 * len(held)  # every job renewed at least twice, not every cycle
    assert renewed < len(held) * (2 * lease_s + 4) / 2  # fewer than once per job per cycle
    slurm_cluster.spec.heartbeat_file.unlink()  # the daemon dies (kill -9: nothing else to do)
    died = time.time()
    leases = {j: eligible(slurm_cluster, j) for j in held}  # the last lease each job was given
    assert all(t <= died + lease_s + 1 for t in leases.values())
    for job in held:
        assert wait_started(slurm_cluster, job, lease_s + SCHEDULING_PASS_S) <= \
            died + lease_s + SCHEDULING_PASS_S
        started = time.mktime(time.strptime(job_fields(slurm_cluster, job)["StartTime"],
                                            "%Y-%m-%dT%H:%M:%S"))
        assert started >= leases[job] - 1  # plain Slurm, once the lease ended: not before
