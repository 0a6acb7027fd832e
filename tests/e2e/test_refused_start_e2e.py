"""Issue 38 row 2 on the real 16-node × 8-GPU Slurm 22.05 cluster: one unstartable hinted job
(``--gres=gpu:nope:1``, which 22.05 accepts under ``--hold``) no longer starves a gang that needs
every GPU; since issue 35 the daemon does not even try to start it. The real ``railgang daemon run`` process; docs/slurm-backend.md, "Refused starts"."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.conftest import RAILGANG, Cluster, wait_for
from tests.e2e.test_daemon_e2e import Start, gang, running_on

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _slurm_major(slurm: Cluster) -> int:
    """Slurm's major version (``slurm 24.11.5`` -> 24)."""
    return int(slurm.sl("sinfo", "--version").stdout.split()[1].split(".")[0])


def reason(slurm: Cluster, job: str) -> str:
    return slurm.sl("squeue", "-h", "-j", job, "-o", "%r").stdout.strip()


def test_a_job_asking_a_gpu_type_no_node_has_never_holds_up_a_full_cluster_gang(
        slurm: Cluster, daemon: Start) -> None:
    """Issue 38 row 2's repro since issue 35 reads GPU types: the daemon planned a
    ``--gres=gpu:nope:1`` job every cycle, Slurm refused every Start ("Invalid GRES
    specification") and the gang waited "needs 128 GPUs, 127 free" on an idle cluster; row 2
    made the job sit out after its refusals. Now no Start is even tried: no node has GPU type
    nope, so the job waits for its type, holds no GPU, and the gang starts at once. (The sit-out
    after refused Starts is held by tests/daemon/slurm/cli/test_start_backoff.py and
    tests/daemon/service/test_refused_starts.py: on this cluster Slurm no longer refuses one.)"""
    d = daemon(daemon__policy="fifo")
    bad = slurm.sbatch("--hold", "--gres=gpu:nope:1", "--comment=rg:parallel=tp1;class=3",
                       args=("5",))
    slurm.sl("scontrol", "release", bad)
    full = slurm.sbatch(*gang(16, 3), args=("5",))  # every GPU of the cluster
    wait_for(lambda: running_on(slurm, full), 30, "the 16-node gang to start beside the bad job")
    e = d.explain(bad)
    if _slurm_major(slurm) >= 24 and e.get("state") == "gone":
        # 24.11 (seen in CI's suites run inside the trixie container) ends such a job itself
        # once it is released, so it holds nothing and the gang has started
        assert not slurm.sl("squeue", "-h", "-t", "PD", "-j", bad, check=False).stdout.strip()
        return
    assert e.get("state") == "waiting" and not e.get("start_refused"), e
    assert "nope" in json.dumps(e), e  # explain names the type it waits for
    assert not [job for job, _state, _detail in d.journal("start") if job == bad]
    status = json.loads(subprocess.run([RAILGANG, "daemon", "status", "--json"], env=d.env,
                                       capture_output=True, text=True, timeout=60).stdout)
    assert status["refused_starts"]["jobs"] == 0, status["refused_starts"]
