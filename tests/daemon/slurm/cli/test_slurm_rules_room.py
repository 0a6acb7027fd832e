"""CPUs, memory, GPU types, reservations, licenses, QOS limits and arrays in the CLI backend
(issue 35 item 2; slurm/cli/asks.py, rules.py; docs/slurm-backend.md "Slurm's own rules"):
read from the captured 22.05 / 24.11 / 26.05 JSON and from the narrow read alike, they narrow
where the core may place a job or leave it to Slurm with a reason. The real cluster's run is
tests/e2e/test_site_e2e.py."""

from __future__ import annotations

import random
from typing import Any

import pytest

from railgang.daemon.core import Start, decide
from railgang.daemon.core.model.room import NO_ASK, Ask, Room
from railgang.daemon.core.policies.registry import get
from railgang.daemon.slurm.cli.asks import gpu_type, job_ask, node_room
from railgang.daemon.slurm.cli.records import SinfoNode, parse_sinfo
from railgang.daemon.slurm.cli.rules import Places, left_to_slurm, limit_reason, rooms
from railgang.daemon.slurm.cli.snapshot import build_observation
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.slurm.cli.capture import DATA
from tests.daemon.slurm.cli.test_slurm_rules import NODES, rec

GB = 1024
IDLE = NODES["n01"].state


@pytest.mark.parametrize(("raw", "nodes", "ask"), [
    # --gres=gpu:h100:2 --mem-per-gpu=8G --cpus-per-gpu=2 (22.05)
    ({"tres_req_str": "cpu=1,mem=16G,node=1,billing=5,gres/gpu=2", "memory_per_tres": "gres:gpu:8192",
      "cpus_per_tres": "gres:gpu:2"}, 1, Ask(cpus_per_gpu=2, mem_mb_per_gpu=8 * GB)),
    # -N1 --mem=20G --exclusive (22.05: shared "none"; 24.11: a list)
    ({"tres_req_str": "cpu=1,mem=20G,node=1", "shared": "none"}, 1, Ask(cpus=1, mem_mb=20 * GB, exclusive=True)),
    ({"tres_req_str": "cpu=1,mem=20G,node=1", "shared": ["none"]}, 1, Ask(cpus=1, mem_mb=20 * GB, exclusive=True)),
    # -N2 -c 6 --mem-per-cpu=1G: per node half of it
    ({"tres_req_str": "cpu=12,mem=12G,node=2"}, 2, Ask(cpus=6, mem_mb=6 * GB)),
    ({"tres_req_str": "cpu=1,mem=1G,node=1", "shared": []}, 1, Ask(cpus=1, mem_mb=GB)),
    # --gres=gpu:4 --cpus-per-gpu=2: DefMemPerCPU's memory grows with its CPUs (JSON: per CPU)
    ({"tres_req_str": "cpu=1,mem=1G,node=1", "cpus_per_tres": "gres:gpu:2", "memory_per_cpu": 1024,
      "memory_per_node": None}, 1, Ask(cpus_per_gpu=2, mem_mb_per_gpu=2 * GB)),
    ({"tres_req_str": "cpu=1,mem=10G,node=1", "cpus_per_tres": "gres:gpu:2", "memory_per_cpu": None,
      "memory_per_node": {"set": True, "number": 10240}}, 1, Ask(mem_mb=10 * GB, cpus_per_gpu=2)),
    # the narrow read does not say which: per CPU, more than asked, never less
    ({"tres_req_str": "cpu=1,mem=10G,node=1", "cpus_per_tres": "gres:gpu:2"}, 1,
     Ask(cpus_per_gpu=2, mem_mb_per_gpu=20 * GB)),
    ({}, 1, NO_ASK), ({"tres_req_str": "garbage", "memory_per_tres": "N/A"}, 1, NO_ASK),
])
def test_a_jobs_ask_from_its_record(raw: dict[str, Any], nodes: int, ask: Ask) -> None:
    assert job_ask(raw, nodes) == ask


def test_the_gpu_type_a_job_asks_for() -> None:
    assert gpu_type({"tres_per_node": "gres:gpu:h100:2"}) == "h100"
    assert gpu_type({"tres_per_job": "gres/gpu:A100:8"}) == "a100"  # 24.11
    assert gpu_type({"tres_per_node": "gres:gpu:8"}) == "" == gpu_type({})


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_a_nodes_room_is_what_every_job_leaves_it(version: str) -> None:
    """Every capture has one 1-CPU, 1 GB job per node (16 CPUs, 64 GB): whoever's it is."""
    nodes, _ = parse_sinfo((DATA / f"sinfo_{version}.json").read_text())
    assert nodes[0].room == Room(15, 63 * GB, idle=False)
    assert node_room({"cpus": 8, "real_memory": 1000}) == Room(8, 1000)
    assert node_room({"cpus": {"total": 8}}) is None and node_room({}) is None


def _node(name: str, gres: str, reserved: bool = False, room: Room | None = None) -> SinfoNode:
    return SinfoNode(name, 8, IDLE, "", frozenset(), gres=gres, partitions=frozenset({"gpu"}),
                     reserved=reserved, room=room)


def test_a_gpu_type_and_a_reservation_narrow_where_a_job_may_run() -> None:
    places = Places([_node("h1", "gpu:h100:8"), _node("a1", "gpu:a100:8(S:0-1)"),
                     _node("v1", "gpu:v100:8", reserved=True)])
    assert places.of(rec(tres_per_node="gres:gpu:h100:2")) == (
        frozenset({"h1"}), "with h100 GPUs outside reservations")
    assert places.of(rec()) == (frozenset({"h1", "a1"}), "outside reservations")


@pytest.mark.parametrize(("fields", "says"), [
    ({"licenses": "fluent:1"}, "it asks for licenses fluent:1 (--licenses"),
    ({"array_task_string": "1-3"}, "a job array (tasks 1-3"),
    ({"state_reason": "QOSMaxGRESPerUser"}, "Slurm holds it on a limit (QOSMaxGRESPerUser"),
    ({"state_reason": "AssocGrpGRES"}, "Slurm holds it on a limit"),
    ({"array_task_string": "2"}, ""), ({"state_reason": "QOSNotAllowed"}, ""), ({"licenses": "(null)"}, ""),
])
def test_licenses_arrays_and_limits_are_left_to_slurm(fields: dict[str, Any], says: str) -> None:
    why = left_to_slurm(rec(**fields))
    assert why.startswith(says) and bool(why) == bool(says), why


def test_limit_reasons() -> None:
    assert limit_reason("QOSGrpGRES") and limit_reason("AssocMaxJobsLimit")
    assert not limit_reason("Resources") and not limit_reason("QOSNotAllowed")


def test_a_job_railgang_just_started_takes_its_ask_from_the_room() -> None:
    """Slurm counts a started job's memory only once it runs; until then railgang does."""
    started = rec(required_nodes="n1", tres_per_node="gres:gpu:4", memory_per_tres="gres:gpu:4096")
    got = rooms([_node("n1", "gpu:8", room=Room(32, 32 * GB)), _node("n2", "gpu:8")], [started])
    assert got == {"n1": Room(31, 16 * GB, idle=False)}  # and its one CPU


def _observe(jobs: list[Any], nodes: list[SinfoNode]):  # type: ignore[no-untyped-def]
    fabric = fabric_from_shape(len(nodes), 8, 1)
    names = list(fabric.nodes)
    nodes = [SinfoNode(names[i], n.gpus, n.state, "", n.features, gres=n.gres,
                       partitions=n.partitions, room=n.room) for i, n in enumerate(nodes)]
    return names, build_observation(0.0, jobs, nodes, fabric)


@pytest.mark.parametrize("policy", ["fifo", "default"])
def test_a_memory_bound_hinted_job_is_started_where_its_memory_is_free(policy: str) -> None:
    """Before: an 8 GPU x 8 GB job was started on the first node with 8 free GPUs and 32 GB, and
    Slurm kept it pending there; now only the node with the memory is a place for it."""
    big = rec(admin_comment="railgang:tp=8,pp=1,dp=1;class=3", tres_per_node="gres:gpu:8",
              memory_per_tres="gres:gpu:8192", tres_req_str="cpu=1,mem=64G,node=1")
    names, obs = _observe([big], [_node("x", "gpu:8", room=Room(32, 32 * GB)),
                                  _node("y", "gpu:8", room=Room(32, 128 * GB))])
    assert obs.snapshot.nodes[names[0]].room == Room(32, 32 * GB)
    d = decide(obs.snapshot, get(policy), 0.0, random.Random(0))
    assert [set(a.assignment) for a in d.actions if isinstance(a, Start)] == [{names[1]}]


def test_a_typed_job_is_started_with_its_type() -> None:
    """Before: gpu:a100:4 was started with Gres=gpu:4, and Slurm refused every such Start
    ("Invalid GRES specification (with and without type identification)")."""
    from railgang.daemon.slurm.cli.commands import start_fields

    assert start_fields({"n03": (0, 1, 2, 3)}, "a100")[2:4] == ["TresPerJob=", "Gres=gpu:a100:4"]
    assert start_fields({"n1": (0, 1), "n2": (0,)}, "h100")[3] == "TresPerJob=gres:gpu:h100:3"
    assert start_fields({"n03": (0,)}, "x y")[3] == "Gres=gpu:1"  # never a field of its own


def test_a_start_slurm_holds_on_a_qos_limit_is_left_to_slurm_at_once() -> None:
    """Measured on the site-like cluster: the second 8-GPU job of a user under MaxTRESPerUser
    gres/gpu=8 was started, Slurm kept it PENDING (QOSMaxGRESPerUser), and for the 120 s of
    STARTING_GRACE_S explain called it 'gone' and its GPUs stayed taken in the plan."""
    held = rec(admin_comment="railgang:tp=1,pp=1,dp=1;class=3", required_nodes="n01",
               state_reason="QOSMaxGRESPerUser", eligible_time=0)  # started at 0, seen at 0
    names, obs = _observe([held], [_node("n1", "gpu:8", room=Room(32, 32 * GB))])
    assert "Slurm holds it on a limit (QOSMaxGRESPerUser" in obs.left.get(held.job_id, "")
    assert len(obs.snapshot.free[names[0]]) == 8
