"""``railgang daemon run --once`` against the real local Slurm 22.05 cluster (CLI backend):
a hinted multi-node job submitted under the begin-time lease is placed inside one leaf, the
journal says so, and ``explain`` shows where and why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from railgang.daemon.slurm.cli import write_heartbeat
from railgang.slurm_plugins.devcluster.cluster import DevCluster, slurm_env

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
RAILGANG = str(Path(sys.executable).with_name("railgang"))


def _squeue(cluster: DevCluster, job: str) -> dict[str, str]:
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T|%N|%r"], capture_output=True,
                         text=True, env=slurm_env(cluster.spec), timeout=60, check=True).stdout
    state, nodes, reason = [*out.strip().split("|"), "", "", ""][:3]
    return {"state": state, "nodes": nodes, "reason": reason}


def test_daemon_once_places_a_hinted_job_on_the_real_cluster(slurm_cluster: DevCluster,
                                                             tmp_path: Path) -> None:
    spec = slurm_cluster.spec
    write_heartbeat(spec.heartbeat_file, time.time(), 600)  # job_submit.lua leases new ML jobs
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nsleep 300\n")
    script.chmod(0o755)
    job = subprocess.run(
        ["sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null", "--account=team-a",
         "-N2", "--gres=gpu:8", "--comment=rg:parallel=tp8,dp2;class=1", str(script)],
        capture_output=True, text=True, env=slurm_env(spec), timeout=60, check=True,
    ).stdout.strip().split(";")[0]
    env = {**os.environ, **slurm_env(spec), "RAILGANG_CONFIG": "",
           "RAILGANG_DB__URL": f"sqlite:///{tmp_path / 'rg.sqlite'}",
           "RAILGANG_SLURM__BACKEND": "cli", "RAILGANG_SLURM__CONF": str(spec.slurm_conf),
           "RAILGANG_DAEMON__HEARTBEAT_FILE": str(spec.heartbeat_file),
           "RAILGANG_DAEMON__METRICS_PORT": "0", "RAILGANG_DAEMON__POLICY": "fifo"}
    try:
        deadline = time.monotonic() + 30
        while _squeue(slurm_cluster, job)["reason"] != "BeginTime":  # held by the lease
            assert time.monotonic() < deadline, _squeue(slurm_cluster, job)
            time.sleep(0.5)
        run = subprocess.run([RAILGANG, "daemon", "run", "--once", "--log-format", "json"],
                             env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        cycle = next(json.loads(x) for x in run.stderr.splitlines() if '"cycle"' in x
                     and '"ms"' in x)
        assert cycle["actions"].get("Start", 0) >= 1 and cycle["failed"] == 0, cycle
        deadline = time.monotonic() + 60
        while (q := _squeue(slurm_cluster, job))["state"] != "RUNNING":
            assert time.monotonic() < deadline, q
            time.sleep(0.5)
        placed = json.loads(subprocess.run([RAILGANG, "explain", job, "--json"], env=env,
                                           capture_output=True, text=True, timeout=60).stdout)
        assert placed["state"] == "running" and placed["how"] == "started"
        assert len(placed["leaves"]) == 1 and placed["rail_aligned"] is True  # one leaf
        assert placed["nodes"] == q["nodes"]  # where Slurm runs it is where railgang put it
        beat = spec.heartbeat_file.read_text().split()
        assert abs(int(beat[0]) - time.time()) < 60
        status = json.loads(subprocess.run([RAILGANG, "daemon", "status", "--json"], env=env,
                                           capture_output=True, text=True, timeout=60).stdout)
        assert status["journal"]["applied"] >= 1 and status["journal"]["planned"] == 0
    finally:
        subprocess.run(["scancel", job], env=slurm_env(spec), timeout=60, check=False)
        spec.heartbeat_file.unlink(missing_ok=True)
