"""The job processes a stopped test cluster would leave behind (devcluster/leftovers.py): found
by this cluster's slurm.conf, the slurmstepd with everything under it, leaves first."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from railgang.devcluster.cluster import DevCluster
from railgang.devcluster.leftovers import stepd_trees
from tests.support.slurm import sl

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_running_jobs_stepd_and_its_processes_are_found(slurm_cluster: DevCluster,
                                                           tmp_path: Path) -> None:
    marker = f"{uuid.uuid4().int % 10**8}"
    job = sl(slurm_cluster, "sbatch", "--parsable", "--account=team-a", f"--chdir={tmp_path}",
             "--output=/dev/null", f"--wrap=sleep 3{marker}").stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 30
        while not any(f"sleep 3{marker}" in _cmdline(p) for p in stepd_trees(
                slurm_cluster.spec.slurm_conf)):
            assert time.monotonic() < deadline, "the job's processes were not found"
            time.sleep(0.5)
        pids = stepd_trees(slurm_cluster.spec.slurm_conf)
        lines = [_cmdline(p) for p in pids]
        sleep = next(i for i, c in enumerate(lines) if f"sleep 3{marker}" in c)
        stepd = next(i for i, c in enumerate(lines) if f"[{job}.batch]" in c)
        assert sleep < stepd  # leaves first: the job's processes before their slurmstepd
        # another cluster's conf finds none of them
        assert not set(pids) & set(stepd_trees(tmp_path / "slurm.conf"))
    finally:
        sl(slurm_cluster, "scancel", job, check=False)
