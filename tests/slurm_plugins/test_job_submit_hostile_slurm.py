"""job_submit.lua against hostile and ordinary user actions on the real slurmctld (issue 18 rows
1, 2, 5, 8, 12; docs/security.md): what the lua5.1 tests check, here through sbatch and scontrol
as the users who would do it — a plain user, the daemon's own non-root user, root."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from railgang.daemon.slurm.cli import write_heartbeat
from railgang.devcluster.cluster import DAEMON_USER, DevCluster, daemon_uid
from railgang.devcluster.layout import TEST_GRANTS
from tests.support.slurm import TENANT, job_fields, sl, tenant

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

USER = TENANT  # a plain user with an association to team-a (tests/support/slurm.py)


@pytest.fixture
def jobs(slurm_cluster: DevCluster, tmp_path: Path) -> Iterator[list[str]]:
    if os.geteuid() != 0:
        pytest.skip("needs root to act as other users")
    tenant(slurm_cluster)
    tmp_path.chmod(0o777)
    submitted: list[str] = []
    yield submitted
    if submitted:
        sl(slurm_cluster, "scancel", *submitted, check=False)
    slurm_cluster.spec.heartbeat_file.unlink(missing_ok=True)
    slurm_cluster.spec.class_grants_file.write_text(TEST_GRANTS)


def submit(cluster: DevCluster, jobs: list[str], *opts: str, user: str | None = USER,
           comment: str = "rg:parallel=tp2;class=3") -> str:
    res = sl(cluster, "sbatch", "--parsable", "--output=/dev/null", "--account=team-a", "--gres=gpu:2",
             f"--comment={comment}", *opts, "--wrap=sleep 1", user=user)
    jobs.append(res.stdout.strip().split(";")[0])
    return jobs[-1]


def test_a_64k_comment_is_refused_at_once(slurm_cluster: DevCluster, jobs: list[str]) -> None:
    comment = "rg:class=3;x=" + " " * 65536 + "y"  # 21 s of slurmctld CPU for the old script
    t0 = time.monotonic()
    res = sl(slurm_cluster, "sbatch", "--account=team-a", "--output=/dev/null", f"--comment={comment}",
             "--wrap=true", check=False, user=USER)
    assert res.returncode != 0 and "railgang hints are at most 512 characters" in res.stderr
    assert time.monotonic() - t0 < 10  # a hang guard; the cost itself is in BENCHMARKS.md (sdiag)


def test_the_daemons_user_moves_a_lease_and_the_owner_cannot(
        slurm_cluster: DevCluster, jobs: list[str]) -> None:
    if daemon_uid() is None:
        pytest.fail(f"the devcluster did not create the daemon user {DAEMON_USER!r}")
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), 600)
    job = submit(slurm_cluster, jobs)
    owner = sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "StartTime=now", check=False, user=USER)
    assert owner.returncode != 0
    # the deployment's daemon: not root, a Slurm administrator, trusted by job_submit.lua by name
    # ... and a Slurm administrator: the preemption and grow marks go into AdminComment
    mark = "AdminComment=railgang:tp=2,pp=1,dp=1;class=3;preempt=1796000000@0"
    for change in ("Priority=5000", mark, "StartTime=now"):
        res = sl(slurm_cluster, "scontrol", "update", f"jobid={job}", change, check=False, user=DAEMON_USER)
        assert res.returncode == 0, (change, res.stderr)
    fields = job_fields(slurm_cluster, job)
    assert fields["Priority"] == "5000" and fields["AdminComment"].endswith("preempt=1796000000@0")


def test_the_owner_may_hold_and_release_a_leased_job(slurm_cluster: DevCluster, jobs: list[str]) -> None:
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), 600)
    job = submit(slurm_cluster, jobs, "--hold")
    eligible = job_fields(slurm_cluster, job)["EligibleTime"]
    res = sl(slurm_cluster, "scontrol", "release", job, check=False, user=USER)
    assert res.returncode == 0, res.stderr
    fields = job_fields(slurm_cluster, job)
    assert fields["Reason"] != "JobHeldUser" and fields["EligibleTime"] == eligible  # lease kept
    assert sl(slurm_cluster, "scontrol", "hold", job, check=False, user=USER).returncode == 0


def test_a_class0_job_cannot_move_to_an_account_without_the_grant(
        slurm_cluster: DevCluster, jobs: list[str]) -> None:
    slurm_cluster.spec.class_grants_file.write_text("0 account team-a\n")
    job = submit(slurm_cluster, jobs, "--hold", user=None, comment="rg:parallel=tp2;class=0")
    moved = sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "Account=team-b", check=False)
    assert moved.returncode != 0  # root too: the grant decides, not who asks
    assert job_fields(slurm_cluster, job)["Account"] == "team-a"
    slurm_cluster.spec.class_grants_file.write_text("0 account team-a\n0 account team-b\n")
    assert sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "Account=team-b").returncode == 0


def test_a_users_begin_is_kept_under_the_lease(slurm_cluster: DevCluster, jobs: list[str]) -> None:
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), 60)
    job = submit(slurm_cluster, jobs, "--begin=now+3600")
    fields = job_fields(slurm_cluster, job)
    tag = fields["AdminComment"]
    begin = int(tag.split("begin=")[1].split(";")[0])
    assert abs(begin - (time.time() + 3600)) < 120
    assert fields["Reason"] == "BeginTime"


def test_a_shape_without_a_gpu_request_is_refused(slurm_cluster: DevCluster, jobs: list[str]) -> None:
    # issue 38 row 8: tagged before, with tp x pp x dp = 2^48 GPUs that Slurm never gives the job
    res = sl(slurm_cluster, "sbatch", "--account=team-a", "--output=/dev/null",
             "--comment=rg:parallel=tp65536,pp65536,dp65536", "--wrap=true", check=False, user=USER)
    assert res.returncode != 0, res.stdout
    assert "needs 281474976710656 GPUs but the job asks for none" in res.stderr, res.stderr
    # the same shape's GPU request through --gpus-per-task is a request: tagged as before
    res = sl(slurm_cluster, "sbatch", "--parsable", "--hold", "--account=team-a",
             "--output=/dev/null", "--ntasks=2", "--gpus-per-task=1",
             "--comment=rg:parallel=tp2;class=3", "--wrap=true", user=USER)
    job = res.stdout.strip().split(";")[0]
    jobs.append(job)
    assert job_fields(slurm_cluster, job)["AdminComment"] == "railgang:tp=2,pp=1,dp=1;class=3"
