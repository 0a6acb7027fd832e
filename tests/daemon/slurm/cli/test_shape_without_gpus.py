"""A railgang shape with no GPU request behind it (issue 38 row 8): job_submit.lua refuses it
(tests/slurm_plugins/test_job_submit_hostile.py); a job tagged so anyway (before the script did,
or by hand) is skipped by the daemon with a warning naming it, not counted as tp x pp x dp GPUs
that Slurm never gives it, and not leased."""

from __future__ import annotations

import json

import pytest

from railgang.daemon.slurm.cli.records import parse_sinfo, parse_squeue, topology_from_show
from railgang.daemon.slurm.cli.snapshot import build_observation
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf
from tests.daemon.slurm.cli.capture import DATA, NOW


def _observe(tag: str, tres: dict[str, str]) -> tuple[list[str], tuple[str, ...], tuple[str, ...]]:
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    for job in raw["jobs"]:
        if job["job_id"] == 12:
            job["admin_comment"] = tag
            job.update({f"tres_per_{k}": "" for k in ("job", "node", "task", "socket")}, **tres)
    jobs, _ = parse_squeue(json.dumps(raw))
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(topology_from_show(
        (DATA / "scontrol_topology.txt").read_text())))
    obs = build_observation(NOW, jobs, nodes, fabric)
    return [j.job_id for j in obs.snapshot.pending], obs.skipped, obs.leased


@pytest.mark.parametrize("tag", ["railgang:tp=65536,pp=65536,dp=65536;class=3",
                                 "railgang:tp=2,pp=1,dp=1;class=3", "railgang:elastic=1:4;class=3"])
def test_a_shape_without_a_gpu_request_is_skipped_with_a_warning(tag: str) -> None:
    pending, skipped, leased = _observe(tag, {})
    assert "12" not in pending and "12" not in leased
    assert any(s.startswith("job 12: tagged with a parallel shape but asks Slurm for no GPUs")
               for s in skipped), skipped


@pytest.mark.parametrize("tres", [{"tres_per_job": "gres:gpu:2"}, {"tres_per_node": "gres:gpu:2"},
                                  {"tres_per_task": "gres:gpu:1"}])
def test_any_gpu_request_keeps_the_job(tres: dict[str, str]) -> None:
    pending, skipped, _ = _observe("railgang:tp=2,pp=1,dp=1;class=3", tres)
    assert "12" in pending and not any(s.startswith("job 12") for s in skipped)
