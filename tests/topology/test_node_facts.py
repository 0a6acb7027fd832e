"""One way to know a node (issue 34 item 5): the daemon's fabric (the CLI backend, from sinfo) and
the simulator's pools build their nodes with ``topology/node_facts.py``, so a tensor-parallel job
on PCIe-only nodes gets the same answer, with the same reason, in both worlds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.sim.pools import mixed_cluster, parse_pools
from railgang.daemon.slurm.cli import CliBackend
from railgang.daemon.slurm.cli.records import SinfoNode
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.topology.node_facts import node_facts, node_facts_from_gres
from railgang.topology.placement import GangRequest, Unplaceable, place

NODES = ("v100-on-demand-001", "v100-on-demand-002")  # as the simulator names a pool's nodes


def _daemon_fabric(tmp_path: Path, gres: str, features: frozenset[str] = frozenset()):  # type: ignore[no-untyped-def]
    nodes = [SinfoNode(n, 8, NodeState("idle"), "", features, gres=gres) for n in NODES]
    topo = tmp_path / "topology.conf"
    topo.write_text("SwitchName=s1 Nodes=v100-on-demand-[001-002]\n")
    backend = CliBackend(SlurmSettings(topology=topo), SlurmRunner(), read_shares=False)
    return backend._fabric_for(nodes)


def test_a_tp4_job_on_pcie_only_nodes_gets_the_same_reason_from_the_daemon_and_the_simulator(
        tmp_path: Path) -> None:
    # before: the daemon's fabric took every node for an 80 GB NVLink part and placed the job
    sim = mixed_cluster(parse_pools("v100=16", 8), 8, 4).fabric
    live = _daemon_fabric(tmp_path, "gpu:v100:8(S:0-1)")
    request = GangRequest(gpus=8, tp=4)
    free = {n: frozenset(range(8)) for n in NODES}
    a, b = place(sim, free, request), place(live, free, request)
    assert isinstance(a, Unplaceable) and isinstance(b, Unplaceable)
    assert a == b and a.code.value == "no_nvlink_domain"
    assert live.facts(NODES[0]) == sim.facts(NODES[0])


def test_a_node_feature_says_nvlink_where_the_catalogue_would_not(tmp_path: Path) -> None:
    live = _daemon_fabric(tmp_path, "gpu:v100:8", frozenset({"nvlink"}))  # a DGX-1's SXM2 V100s
    free = {n: frozenset(range(8)) for n in NODES}
    assert not isinstance(place(live, free, GangRequest(gpus=8, tp=4)), Unplaceable)


@pytest.mark.parametrize(("gres", "features", "nvlink", "mem"), [
    ("gpu:8", (), True, 80.0),  # untyped: unknown, placed as always
    ("gpu:h100:8(S:0-1)", (), True, 80.0),
    ("gres/gpu:V100:8", (), False, 32.0),  # 24.11 spelling, any case
    ("gpu:v100:8", ("gpumem_16g", "nvlink"), True, 16.0),
    ("gpu:h100:8", ("pcie",), False, 80.0),
])
def test_facts_from_the_gres_and_features(gres: str, features: tuple[str, ...], nvlink: bool,
                                          mem: float) -> None:
    f = node_facts_from_gres("n1", gres, features, 8)
    assert (f.nvlink, f.gpu_mem_gb, f.gpus) == (nvlink, mem, 8)


@given(st.text(max_size=80), st.lists(st.text(max_size=20), max_size=5), st.integers(0, 64))
def test_any_gres_and_features_give_facts_never_an_error(gres: str, features: list[str], gpus: int) -> None:
    f = node_facts_from_gres("n1", gres, features, gpus)
    assert f.gpus >= 1 and f.gpu_mem_gb > 0 and f == node_facts("n1", f.gpus, f.gpu_type, features)
