"""squeue/sinfo/sshare output captured from the 22.05 test cluster -> records -> Snapshot.

The fixtures (tests/daemon/slurm/cli/data) hold: railgang jobs running on two nodes (9), shrunk
from two nodes to one (10), leased and pending (11, 12 with --gpus=6), one with a malformed
AdminComment (13); plain jobs (8 on a draining node, 14 on a node tagged lame); n14 down, n16
drained; jobs 6 and 7 cancelled (history, ignored).
"""

from __future__ import annotations

import json

import pytest

from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import (
    node_state,
    parse_sinfo,
    parse_squeue,
    parse_sshare,
    topology_from_show,
)
from railgang.daemon.slurm.cli.snapshot import build_observation
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf
from tests.daemon.slurm.cli.capture import DATA, NOW, observation


def test_squeue_records() -> None:
    jobs, problems = parse_squeue((DATA / "squeue_mixed.json").read_text())
    by_id = {j.job_id: j for j in jobs}
    assert sorted(by_id, key=int) == ["8", "9", "10", "11", "12", "13", "14"]  # cancelled left out
    assert by_id["9"].allocation == (("n01", tuple(range(8))), ("n02", tuple(range(8))))
    assert by_id["10"].allocation == (("n05", (0, 1, 2, 3)),) and by_id["10"].resize_time > 0
    assert by_id["12"].gpus_requested == 6  # --gpus=6 is per job
    assert by_id["11"].gpus_requested == 32 and by_id["11"].reason == "BeginTime"
    assert by_id["13"].tag is None and problems == [by_id["13"].tag_problem]
    assert "job 13" in problems[0] and "AdminComment" in problems[0]


def test_sinfo_records() -> None:
    nodes, problems = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    states = {n.name: n.state for n in nodes}
    assert problems == [] and len(nodes) == 16 and {n.gpus for n in nodes} == {8}
    assert states["n13"] == "drain" and states["n14"] == "down" and states["n16"] == "drain"
    assert states["n01"] == "mixed" and states["n05"] == "mixed" and states["n03"] == "idle"
    assert {n.name: n.features for n in nodes}["n15"] == {"rg_lame"}


@pytest.mark.parametrize(
    ("base", "flags", "state"),
    [("idle", [], "idle"), ("mixed", ["DRAIN"], "drain"), ("allocated", [], "alloc"),
     ("idle", ["NOT_RESPONDING"], "down"), ("down", ["DRAIN"], "down"), ("future", [], "down"),
     ("idle", ["MAINTENANCE"], "drain"), ("weird", [], "down")],
)
def test_node_state(base: str, flags: list[str], state: str) -> None:
    assert node_state(base, flags) == state


def test_snapshot_from_capture() -> None:
    obs = observation()
    snap = obs.snapshot
    assert [j.job_id for j in snap.pending] == ["11", "12"] == list(obs.leased)
    big = snap.pending[0]
    assert (big.gpus, big.tp, big.pp, big.priority_class, big.account) == (32, 8, 2, 0, "team-a")
    assert sorted(snap.running) == ["10", "9"]
    run = snap.running["9"]
    assert run.assignment == {"n01": tuple(range(8)), "n02": tuple(range(8))} and run.replicas == 2
    shrunk = snap.running["10"]
    assert shrunk.job.elastic_min == 1 and shrunk.job.elastic_max == 4 and shrunk.replicas == 1
    assert shrunk.job.gpus == 8  # requested tp4 x dp2, holds one replica after the shrink
    # GPUs of plain jobs are not free; drained/down nodes offer none
    assert snap.free["n15"] == frozenset(range(2, 8)) and "n13" not in snap.free
    assert "n14" not in snap.free and "n16" not in snap.free
    assert snap.free["n05"] == frozenset(range(4, 8)) and snap.free["n01"] == frozenset()
    assert snap.nodes["n15"].tags == {"lame"}
    assert snap.accounts["team-a"].share == pytest.approx(0.75)
    assert any("job 13" in s for s in obs.skipped)


def test_started_job_is_not_queued_and_its_gpus_are_not_free() -> None:
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    for job in raw["jobs"]:
        if job["job_id"] == 11:  # as right after a railgang Start: lease ended, pinned
            job["required_nodes"] = "n[09-12]"
            job["eligible_time"] = int(NOW) - 5
            job["state_reason"] = "Resources"
    jobs, _ = parse_squeue(json.dumps(raw))
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(topology_from_show((DATA / "scontrol_topology.txt").read_text())))
    snap = build_observation(NOW, jobs, nodes, fabric).snapshot
    assert [j.job_id for j in snap.pending] == ["12"]
    assert all(snap.free[n] == frozenset() for n in ("n09", "n10", "n11", "n12"))
    later = build_observation(NOW + 600, jobs, nodes, fabric).snapshot  # never started: queue again
    assert [j.job_id for j in later.pending] == ["11", "12"]


def test_held_and_dependent_jobs_are_not_queued() -> None:
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    for job in raw["jobs"]:
        if job["job_id"] == 11:
            job["state_reason"] = "JobHeldUser"
        if job["job_id"] == 12:
            job["state_reason"] = "Dependency"
    jobs, _ = parse_squeue(json.dumps(raw))
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(topology_from_show((DATA / "scontrol_topology.txt").read_text())))
    assert build_observation(NOW, jobs, nodes, fabric).snapshot.pending == ()


def test_unreadable_gres_detail_keeps_nodes_busy() -> None:
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    for job in raw["jobs"]:
        if job["job_id"] == 9:
            job["gres_detail"] = ["gpu:8(IDX:0-7)"]  # two nodes, one entry
    jobs, problems = parse_squeue(json.dumps(raw))
    assert problems[0].startswith("job 9: 1 gres_detail entries for 2 nodes")
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(topology_from_show((DATA / "scontrol_topology.txt").read_text())))
    snap = build_observation(NOW, jobs, nodes, fabric).snapshot
    assert "9" not in snap.running  # not railgang's to move, but its nodes stay busy
    assert snap.free["n01"] == snap.free["n02"] == frozenset()


def test_squeue_garbage_is_a_parse_problem() -> None:
    with pytest.raises(ParseProblem, match="squeue --json: output is not JSON"):
        parse_squeue("slurm_load_jobs error: Unable to contact slurm controller")


def test_sshare_accounts_only() -> None:
    rows, problems = parse_sshare((DATA / "sshare.txt").read_text() + "team-c||x|0\n")
    assert {r.account for r in rows} == {"root", "ml-org", "research", "team-a", "team-b"}
    assert problems == ["sshare line 10: 'team-c||x|0' has no numeric shares/usage"]


def test_topology_from_show_keeps_direct_nodes_only() -> None:
    conf = parse_topology(topology_from_show((DATA / "scontrol_topology.txt").read_text()))
    fabric = fabric_from_conf(conf)
    assert fabric.leaf_of("n05") == "leaf2" and len(fabric.leaves) == 4


def _with_comments(comments: dict[int, str]) -> str:
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    for job in raw["jobs"]:
        if job["job_id"] in comments:
            job["comment"] = comments[job["job_id"]]
    return json.dumps(raw)


def test_progress_comment_gives_the_work_left() -> None:
    jobs, problems = parse_squeue(_with_comments({
        9: "rg-progress:step=200,sps=512.0,t=1796057390,total=1000,step_s=2,compute_s=1.5",
        10: "rg-progress:step=50,sps=64.0,t=1796057390,total=150,step_s=4",  # shrunk to 1 of 2
        12: "rg-progress:step=5,sps=1.0,t=1796057390"}))  # an old helper: no total
    assert problems == [next(j for j in jobs if j.job_id == "13").tag_problem]
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(topology_from_show((DATA / "scontrol_topology.txt").read_text())))
    snap = build_observation(NOW, jobs, nodes, fabric).snapshot
    assert snap.running["9"].job.work_remaining_s == pytest.approx(800 * 2.0)
    shrunk = snap.running["10"].job
    # 400 s at one replica is less at the requested two: scaled by the job's rate at one
    assert shrunk.work_remaining_s == pytest.approx(400.0 * shrunk.request.rate(1))
    assert shrunk.work_remaining_s < 400.0
    assert next(j for j in snap.pending if j.job_id == "12").work_remaining_s is None


def test_hostile_progress_comment_is_one_problem_line_and_the_job_stays() -> None:
    jobs, problems = parse_squeue(_with_comments({
        9: "rg-progress:step=1e400,sps=1,t=1", 10: "rg-progress:step=1,sps=1,t=1,total=nan"}))
    assert sorted(j.job_id for j in jobs if j.progress_problem) == ["10", "9"]
    bad = [p for p in problems if "Comment:" in p]
    assert len(bad) == 2 and all("\n" not in p and "progress ignored" in p for p in bad)
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(topology_from_show((DATA / "scontrol_topology.txt").read_text())))
    snap = build_observation(NOW, jobs, nodes, fabric).snapshot
    assert {"9", "10"} <= set(snap.running) and snap.running["9"].job.work_remaining_s is None
