"""Progress reports are the user's own Comment (issue 18 row 4, docs/security.md "Progress
reports"): they count only for RUNNING jobs and never for more than the job's time limit leaves,
so a forged report cannot move a pending job ahead of other users' jobs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from railgang.daemon.core.policies import registry as policies
from railgang.daemon.slurm.cli.records import parse_sinfo, parse_squeue, topology_from_show
from railgang.daemon.slurm.cli.snapshot import build_observation
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf
from tests.daemon.slurm.cli.capture import DATA, NOW

SQUEUE = json.loads((DATA / "squeue_mixed.json").read_text())
TEMPLATE = next(j for j in SQUEUE["jobs"] if j["job_id"] == 12)  # pending, class 3, 6 GPUs
RUNNING = next(j for j in SQUEUE["jobs"] if j["job_id"] == 9)  # running since NOW - 24
FORGED = f"rg-progress:step=0,sps=1,t={int(NOW)},total=1,step_s=1e-6"


def queue(forged_comment: str) -> list[dict[str, Any]]:
    """Five users' jobs submitted an hour apart, limit 4 h; mallory's (30) is the newest and
    big enough to wait behind them."""
    jobs = [{**TEMPLATE, "job_id": 20 + i, "user_name": f"user{i}", "submit_time": NOW - 3600 * (5 - i),
             "time_limit": 240, "comment": ""} for i in range(5)]
    jobs.append({**TEMPLATE, "job_id": 30, "user_name": "mallory", "submit_time": NOW - 60,
                 "time_limit": 240, "comment": forged_comment})
    return jobs


def snapshot(jobs: list[dict[str, Any]]) -> Any:
    recs, _ = parse_squeue(json.dumps({**SQUEUE, "jobs": jobs}))
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(topology_from_show(
        (DATA / "scontrol_topology.txt").read_text())))
    return build_observation(NOW, recs, nodes, fabric).snapshot


@pytest.mark.parametrize("name", ["default", "themis"])
def test_a_forged_report_on_a_pending_job_does_not_change_the_order(name: str) -> None:
    honest = policies.get(name).plan(snapshot(queue("")), NOW).order
    forged = policies.get(name).plan(snapshot(queue(FORGED)), NOW).order
    assert [w.job_id for w in forged] == [w.job_id for w in honest]


def test_a_pending_job_has_no_work_left_from_its_comment() -> None:
    snap = snapshot(queue(FORGED))
    assert all(j.work_remaining_s is None for j in snap.pending)


def test_a_running_report_is_clamped_to_what_the_time_limit_leaves() -> None:
    started = NOW - 600
    too_long = f"rg-progress:step=0,sps=1,t={int(NOW)},total=1000000,step_s=10"
    job = {**RUNNING, "time_limit": 60, "start_time": started, "comment": too_long}
    run = snapshot([job]).running["9"]
    assert run.job.work_remaining_s == pytest.approx(3600 - 600)
    honest = {**job, "comment": f"rg-progress:step=0,sps=1,t={int(NOW)},total=10,step_s=10"}
    assert snapshot([honest]).running["9"].job.work_remaining_s == pytest.approx(100)
    unlimited = {**job, "time_limit": None}
    assert snapshot([unlimited]).running["9"].job.work_remaining_s == pytest.approx(1e7)
