"""Jobs sharing GPUs (``--gres=shard:N``, ``--gres=mps:N``) are left to Slurm's own placement
(issue 35 item 3; slurm/cli/sharing.py, docs/slurm-backend.md "Shared GPUs"): a waiting hinted one
is never started by the daemon (its lease released once, ``explain`` says why) and holds no GPUs
in the plan; a running one holds one GPU of each node it runs on, for whole-GPU work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from railgang.daemon.core.model.actions import Start
from railgang.daemon.service.explain import held_back_rows
from railgang.daemon.slurm.cli.records import parse_sinfo, squeue_job
from railgang.daemon.slurm.cli.sharing import sharing_request
from railgang.daemon.slurm.cli.snapshot import free_gpus
from tests.daemon.slurm.cli.capture import DATA
from tests.daemon.slurm.cli.test_start_backoff import PENDING, FakeSlurm, backend, cycles, starts

NODES = parse_sinfo((DATA / "sinfo_mixed.json").read_text())[0]


def job(job_id: int, **fields: Any) -> dict[str, Any]:
    return {**PENDING, "job_id": job_id, "admin_comment": "railgang:tp=1,pp=1,dp=1;class=3",
            "node_count": 1, "tres_per_node": "gres:gpu:1", **fields}


def running_shard(job_id: int, node: str, detail: str | None) -> dict[str, Any]:
    return {**job(job_id, tres_per_node="gres:shard:2", admin_comment="railgang:class=3"),
            "job_state": "RUNNING", "state_reason": "None", "nodes": node,
            "job_resources": {"allocated_nodes": [{"nodename": node}]},
            "gres_detail": [detail] if detail is not None else []}


@pytest.mark.parametrize(("tres", "shares"), [
    ({"tres_per_node": "gres:shard:2"}, "shard:2"), ({"tres_per_node": "gres/shard:3"}, "shard:3"),
    ({"tres_per_job": "gres:mps:50"}, "mps:50"), ({"tres_per_node": "gres:gpu:1,gres:shard:a100:4"}, "shard:4"),
    ({"tres_per_node": "gres:gpu:8"}, ""), ({"tres_per_node": "gres:shardx:2"}, ""), ({}, ""),
])
def test_the_sharing_gres_a_job_asks_for(tres: dict[str, str], shares: str) -> None:
    assert sharing_request(tres) == shares


def test_a_waiting_shard_job_is_left_to_slurm_and_holds_nothing(tmp_path: Path) -> None:
    """Before: a hinted job asking for --gres=shard:2 (no whole GPU) was planned as a one-GPU job
    and pinned by the daemon; now it is left to Slurm, and the gang behind it has every GPU."""
    shard = job(70, tres_per_node="gres:shard:2", admin_comment="railgang:class=3",
                submit_time=PENDING["submit_time"] - 60)
    gang = job(71, admin_comment="railgang:tp=8,pp=1,dp=13;class=3", node_count=13,
               tres_per_node="gres:gpu:8")
    fake = FakeSlurm([shard, gang], bad=set())
    be = backend(fake, tmp_path)
    out = cycles(be, 2)
    assert starts(out[0]) == ["71"]  # the gang has every GPU: the shard job holds none
    assert all(a.job_id != "70" for o in out for a in o.actions if isinstance(a, Start))
    releases = fake.releases()
    assert len(releases) == 1 and releases[0][2] == "jobid=70"  # its lease, released once
    (h,) = be.held_back()
    assert h.job_id == "70" and h.left_to_slurm and h.kind == "rules"
    (row,) = held_back_rows([h], "fifo")
    assert row.reason == "left_to_slurm" and row.detail.startswith(
        "it asks for shared GPUs (--gres=shard:2): Slurm places GPU shards and MPS itself")


@pytest.mark.parametrize("detail", ["shard:2(2/4,0/4,0/4,0/4,0/4,0/4,0/4,0/4)", None, "gpu:1(IDX:3)"])
def test_a_running_shard_job_holds_one_gpu_of_its_node_and_is_no_warning(detail: str | None) -> None:
    rec = squeue_job(running_shard(80, "n05", detail))
    assert rec.shares_gpus == "shard:2" and rec.alloc_problem == ""
    free = free_gpus(NODES, [rec], PENDING["submit_time"])
    n05 = next(n for n in NODES if n.name == "n05")
    if n05.state.usable:
        want = 7 if n05.gpus == 8 else n05.gpus - 1
        assert len(free["n05"]) == want
        assert 3 not in free["n05"] if detail == "gpu:1(IDX:3)" else 0 not in free["n05"]
