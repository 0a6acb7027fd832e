"""Integration tests against the real local Slurm 22.05 cluster (16 nodes × 8 GPUs, slurmdbd)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.devcluster.cluster import DevCluster
from railgang.devcluster.layout import ClusterSpec
from railgang.devcluster.processes import is_running
from tests.support.ports import MINI_CLUSTER_PORT
from tests.support.slurm import sl

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def submit(cluster: DevCluster, tmp_path: Path, *opts: str, cmd: str = "sleep 1") -> int:
    res = sl(cluster, "sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null", *opts,
             f"--wrap={cmd}")
    return int(res.stdout.strip().split(";")[0])


def job_json(cluster: DevCluster, job_id: int) -> dict[str, Any]:
    data = json.loads(sl(cluster, "squeue", "--json", "-j", str(job_id)).stdout)
    return next(j for j in data["jobs"] if j["job_id"] == job_id)


def wait_state(cluster: DevCluster, job_id: int, states: set[str], timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        res = sl(cluster, "scontrol", "show", "job", "-o", str(job_id), check=False)
        fields = dict(kv.split("=", 1) for kv in res.stdout.split() if "=" in kv)
        last = fields
        if fields.get("JobState") in states:
            return fields
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} not in {states} after {timeout_s}s: {last.get('JobState')}")


def test_all_nodes_idle_with_8_gpus(slurm_cluster: DevCluster) -> None:
    from railgang.daemon.slurm.cli.records import parse_sinfo  # every Slurm version's schema

    records, problems = parse_sinfo(sl(slurm_cluster, "sinfo", "--json", "--Node").stdout)
    nodes = {n.name: n for n in records}
    assert sorted(nodes) == [f"n{i:02d}" for i in range(1, 17)] and problems == []
    for n in nodes.values():
        assert n.gres == "gpu:8"
        assert n.state == "idle"


def test_topology_is_four_leaves(slurm_cluster: DevCluster) -> None:
    out = sl(slurm_cluster, "scontrol", "show", "topology").stdout
    assert "SwitchName=leaf2 Level=0" in out and "Nodes=n[05-08]" in out
    assert "SwitchName=spine Level=1" in out


def test_held_gang_placed_on_one_leaf(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    job = submit(slurm_cluster, tmp_path, "--account=team-a", "-N4", "--gres=gpu:8", "--hold",
                 cmd="sleep 3")
    fields = wait_state(slurm_cluster, job, {"PENDING"})
    assert fields["Reason"] == "JobHeldUser"
    sl(slurm_cluster, "scontrol", "update", f"jobid={job}", "ReqNodeList=n[09-12]")
    sl(slurm_cluster, "scontrol", "release", str(job))
    fields = wait_state(slurm_cluster, job, {"RUNNING", "COMPLETED"})
    assert fields["NodeList"] == "n[09-12]"
    detail = job_json(slurm_cluster, job)
    assert detail["gres_detail"] == ["gpu:8(IDX:0-7)"] * 4
    wait_state(slurm_cluster, job, {"COMPLETED"})


def test_drain_and_resume(slurm_cluster: DevCluster) -> None:
    sl(slurm_cluster, "scontrol", "update", "nodename=n16", "state=drain", "reason=lame IB link")
    states = slurm_cluster.node_states()
    assert states["n16"] in {"drain", "drng"}
    out = sl(slurm_cluster, "sinfo", "-h", "-R", "-o", "%n %E").stdout
    assert "n16 lame IB link" in out
    sl(slurm_cluster, "scontrol", "update", "nodename=n16", "state=resume")
    assert slurm_cluster.node_states()["n16"] == "idle"


def test_sacct_lists_finished_job_with_gpus(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    from railgang.daemon.slurm.cli.schemas import state_word  # 24.11+: ["COMPLETED"]

    job = submit(slurm_cluster, tmp_path, "--account=team-b", "-N2", "--gres=gpu:4", cmd="true")
    wait_state(slurm_cluster, job, {"COMPLETED"})
    deadline = time.monotonic() + 20
    record: dict[str, Any] | None = None
    while time.monotonic() < deadline and record is None:
        data = json.loads(sl(slurm_cluster, "sacct", "--json", "-j", str(job)).stdout)
        done = [j for j in data["jobs"] if state_word(j["state"]["current"]) == "COMPLETED"]
        record = done[0] if done else None
        time.sleep(0.3)
    assert record is not None, "sacct never showed the job COMPLETED"
    assert record["account"] == "team-b"
    gpus = {t["name"]: t["count"] for t in record["tres"]["allocated"] if t["type"] == "gres"}
    assert gpus == {"gpu": 8}


def test_job_submit_rejects_untagged_job(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    res = sl(slurm_cluster, "sbatch", f"--chdir={tmp_path}", "--gres=gpu:8", "--wrap=true",
             check=False)
    assert res.returncode != 0
    assert "railgang: no account given; add --account=<your team>" in res.stderr


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (["--gres=gpu:8", "--comment=rg:parallel=tp8,pp1,dp2"], "needs 16 GPUs but the job asks for 8"),
        (["--gres=gpu:8", "--comment=rg:parallel=tq8"], "'tq8' is not tpN, ppN or dpN"),
        (["--gres=gpu:8", "--comment=rg:elastic=8:4"], "need 1 <= MIN <= MAX"),
        (["--gres=gpu:8", "--comment=rg:class=7"], "--rg-class must be 0 (serving)"),
        (["--gres=gpu:8", "--comment=rg:colour=red"], "unknown hint 'colour'"),
        (["--gres=gpu:8", "--rg-parallel=tp8,pp2"], "needs 16 GPUs but the job asks for 8"),
    ],
    ids=["shape-mismatch", "bad-key", "bad-elastic", "bad-class", "unknown-hint", "spank-mismatch"],
)
def test_job_submit_rejects_bad_hints(slurm_cluster: DevCluster, tmp_path: Path,
                                      opts: list[str], message: str) -> None:
    res = sl(slurm_cluster, "sbatch", f"--chdir={tmp_path}", "--account=team-a", *opts,
             "--wrap=true", check=False)
    assert res.returncode != 0
    assert message in res.stderr


def test_spank_options_reach_job_submit(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    assert "--rg-parallel" in sl(slurm_cluster, "sbatch", "--help").stdout
    job = submit(slurm_cluster, tmp_path, "--account=team-a", "-N2", "--gres=gpu:8",
                 "--rg-parallel=tp8,dp2", "--rg-elastic=1:4", "--rg-class=1", cmd="true")
    fields = wait_state(slurm_cluster, job, {"COMPLETED", "RUNNING", "PENDING"})
    assert fields["AdminComment"] == "railgang:tp=8,pp=1,dp=2;elastic=1:4;class=1"


def test_ml_jobs_leased_only_while_daemon_heartbeats(slurm_cluster: DevCluster, tmp_path: Path) -> None:
    beat = slurm_cluster.spec.heartbeat_file
    beat.write_text(f"{int(time.time())} 600\n")  # epoch, lease seconds (the daemon's lease_s)
    try:
        leased = submit(slurm_cluster, tmp_path, "--account=team-a", "--gres=gpu:8",
                        "--comment=rg:parallel=tp8", cmd="true")
        fields = wait_state(slurm_cluster, leased, {"PENDING"})
        assert fields["Reason"] in ("BeginTime", "None") and fields["Priority"] != "0"
        eligible = time.mktime(time.strptime(fields["EligibleTime"], "%Y-%m-%dT%H:%M:%S"))
        assert 500 < eligible - time.time() <= 600
        # root (the daemon) ends the lease when it places the job
        sl(slurm_cluster, "scontrol", "update", f"jobid={leased}", "StartTime=now")
        wait_state(slurm_cluster, leased, {"COMPLETED", "RUNNING"})
        beat.write_text(f"{int(time.time()) - 3600} 600\n")  # stale: fail open, no lease at all
        free = submit(slurm_cluster, tmp_path, "--account=team-a", "--gres=gpu:8",
                      "--comment=rg:parallel=tp8", cmd="true")
        wait_state(slurm_cluster, free, {"COMPLETED", "RUNNING"})
    finally:
        beat.unlink(missing_ok=True)


def test_status_command_shows_nodes_and_slurm_conf(slurm_cluster: DevCluster) -> None:
    res = CliRunner().invoke(app, ["devcluster", "status", "--dir", str(slurm_cluster.spec.dir), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["up"] is True
    assert data["slurm_conf"] == str(slurm_cluster.spec.slurm_conf)
    assert len(data["nodes"]) == 16 and {n["gpus"] for n in data["nodes"].values()} == {8}


def test_small_cluster_lifecycle_leaves_nothing_behind(tmp_path: Path) -> None:
    """up is idempotent; down stops exactly what up started and nothing else."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    base = MINI_CLUSTER_PORT
    spec = ClusterSpec(dir=tmp_path / "mini", nodes=2, nodes_per_leaf=2, accounting=False,
                       slurmctld_port=base, slurmd_base_port=base + 83)
    cluster = DevCluster(spec)
    try:
        first = cluster.up()
        assert not first.already_running
        assert cluster.node_states() == {"n01": "idle", "n02": "idle"}
        records = cluster.procs.records()
        assert len(records) == 4  # munged, slurmctld, 2 slurmd
        second = cluster.up()
        assert second.already_running
    finally:
        stopped = cluster.down()
    assert stopped == 4
    assert not any(is_running(r) for r in records)
    assert cluster.procs.records() == []
