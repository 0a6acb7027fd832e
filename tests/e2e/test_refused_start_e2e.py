"""Issue 38 row 2 on the real 16-node × 8-GPU Slurm 22.05 cluster: one unstartable hinted job
(``--gres=gpu:nope:1``, which 22.05 accepts under ``--hold``) no longer starves a gang that needs
every GPU. The real ``railgang daemon run`` process; docs/slurm-backend.md, "Refused starts"."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.conftest import RAILGANG, SCHEDULING_PASS_S, Cluster, wait_for
from tests.e2e.test_daemon_e2e import Start, gang, running_on

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# what 22.05's scontrol answers to the Start of such a job
GRES_REFUSAL = "Invalid GRES specification"


def _slurm_major(slurm: Cluster) -> int:
    """Slurm's major version (``slurm 24.11.5`` -> 24)."""
    return int(slurm.sl("sinfo", "--version").stdout.split()[1].split(".")[0])


def reason(slurm: Cluster, job: str) -> str:
    return slurm.sl("squeue", "-h", "-j", job, "-o", "%r").stdout.strip()


def test_an_unstartable_job_sits_out_so_a_full_cluster_gang_starts_then_is_left_to_slurm(
        slurm: Cluster, daemon: Start) -> None:
    """Before: the daemon planned the bad job every cycle, Slurm refused every Start, and the
    gang waited "needs 128 GPUs, 127 free" on an idle cluster until the bad job was cancelled.
    Now the bad job sits out 1, 2, 4, 8 cycles after its refusals (the gang starts in the
    first cycle it sits out), explain shows Slurm's line, and after slurm.start_refusals_max (5)
    refusals its lease is released: Slurm marks it BadConstraints itself."""
    d = daemon(daemon__policy="fifo")
    bad = slurm.sbatch("--hold", "--gres=gpu:nope:1", "--comment=rg:parallel=tp1;class=3",
                       args=("5",))
    slurm.sl("scontrol", "release", bad)
    full = slurm.sbatch(*gang(16, 3), args=("5",))  # every GPU of the cluster
    wait_for(lambda: running_on(slurm, full), 30, "the 16-node gang to start beside the bad job")
    e = d.explain(bad)
    if _slurm_major(slurm) >= 24 and e.get("state") == "gone":
        # 24.11 (seen in CI's suites run inside the trixie container) ends such a job itself
        # once it is released, so it holds nothing and the gang has started: row 2 is 22.05's
        assert not slurm.sl("squeue", "-h", "-t", "PD", "-j", bad, check=False).stdout.strip()
        return
    # sitting out, or back in the queue behind the gang (waiting_for_gpus): Slurm's line stays
    assert e.get("state") == "waiting" and GRES_REFUSAL in str(e.get("start_refused")), e

    wait_for(lambda: d.explain(bad).get("reason") == "left_to_slurm", 120,
             "the bad job to be left to Slurm after 5 refused starts")
    e = d.explain(bad)
    assert e["refusals"] == 5 and GRES_REFUSAL in str(e["start_refused"]), e
    starts = [(state, detail) for job, state, detail in d.journal("start") if job == bad]
    assert len(starts) == 5 and all(s == "failed" for s, _ in starts), starts  # bounded
    # its lease was released: Slurm's own scheduler judges it now
    wait_for(lambda: reason(slurm, bad) == "BadConstraints", SCHEDULING_PASS_S,
             "Slurm to mark the bad job BadConstraints")
    status = json.loads(subprocess.run([RAILGANG, "daemon", "status", "--json"], env=d.env,
                                       capture_output=True, text=True, timeout=60).stdout)
    refused = status["refused_starts"]
    assert refused["jobs"] == 1 and refused["latest"][0]["job_id"] == bad, refused
    assert refused["latest"][0]["left_to_slurm"] is True
    text = subprocess.run([RAILGANG, "daemon", "status"], env=d.env, capture_output=True,
                          text=True, timeout=60).stdout
    assert f"job {bad}: 5 refusal(s), left to Slurm: {GRES_REFUSAL}" in text, text
