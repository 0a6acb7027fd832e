"""The example training job on the real cluster: preempted with the daemon's signal, it writes a
last checkpoint, is requeued, resumes from that step as restart 1 and finishes; a shrink in place
is seen by the job through Slurm."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from railgang.devcluster.cluster import DevCluster
from tests.support.slurm import job_fields
from tests.support.slurm import sl as run_slurm

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def sl(cluster: DevCluster, *argv: str) -> str:
    return run_slurm(cluster, *argv).stdout


def wait_for(pred, timeout_s: float = 60, what: str = "") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def state(cluster: DevCluster, job: str) -> str:
    return job_fields(cluster, job)["JobState"]


def diagnose(cluster: DevCluster, job: str, tmp_path: Path) -> str:
    """What a failed run needs to be understood: Slurm's view of the job, its output, the log."""
    show = run_slurm(cluster, "scontrol", "show", "job", job, check=False).stdout
    outs = "".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("out-*")))
    log = cluster.spec.log / "slurmctld.log"
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if f"JobId={job}" in ln
             or f"job {job}" in ln or f"_{job}" in ln] if log.exists() else []
    return f"scontrol:\n{show}\noutput:\n{outs}\nslurmctld.log:\n" + "\n".join(lines[-40:])


def submit_example(cluster: DevCluster, tmp_path: Path, nodes: int, *args: str) -> str:
    # exec: the batch shell would die of the SIGUSR1 that `scancel --full` sends every process of
    # the job, ending the run as FAILED under the trainer (docs/training.md, "Your batch script").
    wrap = (f"exec env RAILGANG_GRACE_S=3 {sys.executable} -m railgang.demo.train_example "
            f"--checkpoint-dir {tmp_path} " + " ".join(args))
    out = sl(cluster, "sbatch", "--parsable", "--account=team-a", f"-N{nodes}", "--gres=gpu:8",
             f"--rg-parallel=tp8,dp{nodes}", f"--output={tmp_path}/out-%j-%s.txt",
             f"--chdir={tmp_path}", f"--wrap={wrap}")
    return out.strip().split(";")[0]


def test_preempted_example_checkpoints_requeues_and_resumes(slurm_cluster: DevCluster,
                                                             tmp_path: Path) -> None:
    job = submit_example(slurm_cluster, tmp_path, 1, "--steps 40 --step-s 0.25")
    ckpt = tmp_path / f"job-{job}.json"
    wait_for(lambda: ckpt.exists(), what="first checkpoint")
    sl(slurm_cluster, "scancel", "--full", "--signal=USR1", job)
    wait_for(lambda: "preempted" in "".join(p.read_text() for p in tmp_path.glob("out-*")),
             what="the preemption checkpoint")
    step_at_preempt = json.loads(ckpt.read_text())["step"]
    assert 10 <= step_at_preempt < 40
    # The trainer keeps the allocation after its checkpoint, waiting for the requeue.
    assert state(slurm_cluster, job) == "RUNNING"
    sl(slurm_cluster, "scontrol", "requeue", job)

    seen: list[str] = []

    def restarted_and_done() -> bool:
        # A requeue gives the job a begin time ~2 min out once the old run has ended (it may still
        # be COMPLETING under load); end that wait once the job is pending again. Should the update
        # be lost, the begin time passes on its own, hence the generous bound.
        now = state(slurm_cluster, job)
        if now == "PENDING" and "PENDING" not in seen:
            sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "StartTime=now")
        if not seen or seen[-1] != now:
            seen.append(now)
        return now == "COMPLETED"

    try:
        wait_for(restarted_and_done, timeout_s=240, what="completion")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; states seen: {seen}\n{diagnose(slurm_cluster, job, tmp_path)}") from exc
    assert json.loads(ckpt.read_text())["step"] == 40
    log = "".join(p.read_text() for p in tmp_path.glob("out-*"))
    assert f"start at step {step_at_preempt} (restart 1)" in log


def test_example_sees_a_shrink_in_place(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    job = submit_example(slurm_cluster, tmp_path, 2, "--steps 60 --step-s 0.4",
                         "--resize-check-every 2")
    wait_for(lambda: state(slurm_cluster, job) == "RUNNING", what="start")
    time.sleep(1.5)
    sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "NumNodes=1")
    wait_for(lambda: "resized: 2 -> 1" in "".join(p.read_text() for p in tmp_path.glob("out-*")),
             timeout_s=30, what="the job to see its new size")
    sl(slurm_cluster, "scancel", job)
