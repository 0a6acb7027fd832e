"""The rendered cluster files: shape, ports and the traps they must avoid."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.devcluster.layout import (
    ClusterSpec,
    render_gres_conf,
    render_plugstack_conf,
    render_slurm_conf,
    render_slurmdbd_conf,
    render_topology_conf,
)


@pytest.fixture
def spec(tmp_path: Path) -> ClusterSpec:
    return ClusterSpec(dir=tmp_path)


def test_default_is_16_nodes_in_4_leaves(spec: ClusterSpec) -> None:
    assert spec.node_names[0] == "n01" and spec.node_names[-1] == "n16"
    assert [(leaf, len(m)) for leaf, m in spec.leaves] == [(f"leaf{i}", 4) for i in range(1, 5)]


def test_topology_conf_is_leaves_under_one_spine(spec: ClusterSpec) -> None:
    text = render_topology_conf(spec)
    assert "SwitchName=leaf1 Nodes=n[01-04]" in text
    assert "SwitchName=leaf4 Nodes=n[13-16]" in text
    assert "SwitchName=spine Switches=leaf[1-4]" in text


def test_uneven_last_leaf(tmp_path: Path) -> None:
    spec = ClusterSpec(dir=tmp_path, nodes=6, nodes_per_leaf=4)
    assert [m for _, m in spec.leaves] == [["n01", "n02", "n03", "n04"], ["n05", "n06"]]


def test_every_slurmd_has_its_own_port_and_loopback_addr(spec: ClusterSpec) -> None:
    text = render_slurm_conf(spec)
    node_lines = [line for line in text.splitlines() if line.startswith("NodeName=n")]
    assert len(node_lines) == 16
    ports = {line.split("Port=")[1] for line in node_lines}
    assert len(ports) == 16
    assert all("NodeAddr=127.0.0.1" in line for line in node_lines)
    # NodeAddr is not allowed on NodeName=DEFAULT
    default = next(line for line in text.splitlines() if line.startswith("NodeName=DEFAULT"))
    assert "NodeAddr" not in default and "Gres=gpu:8" in default


def test_slurm_conf_uses_private_munge_everywhere(spec: ClusterSpec) -> None:
    text = render_slurm_conf(spec)
    assert f"AuthInfo=socket={spec.munge_socket}" in text
    assert f"AccountingStoragePass={spec.munge_socket}" in text  # dbd connections ignore AuthInfo
    assert "SlurmdParameters=config_overrides" in text
    assert "JobSubmitPlugins=lua" in text and "TopologyPlugin=topology/tree" in text
    assert "StorageHost=127.0.0.1" in render_slurmdbd_conf(spec)


def test_without_accounting(tmp_path: Path) -> None:
    spec = ClusterSpec(dir=tmp_path, accounting=False)
    text = render_slurm_conf(spec)
    assert "AccountingStorageType=accounting_storage/none" in text
    assert "AccountingStorageTRES" not in text  # fatal without slurmdbd
    assert set(spec.ports) == {"slurmctld"} | {f"slurmd n{i:02d}" for i in range(1, 17)}


@pytest.mark.parametrize(("gpus", "files"), [(8, "nvidia[0-7]"), (1, "nvidia0")], ids=["8", "1"])
def test_gres_conf_points_at_device_nodes(tmp_path: Path, gpus: int, files: str) -> None:
    text = render_gres_conf(ClusterSpec(dir=tmp_path, gpus_per_node=gpus))
    assert "AutoDetect=off" in text
    assert f"NodeName=n[01-16] Name=gpu File={tmp_path}/dev/{files}" in text


def test_plugstack(tmp_path: Path) -> None:
    assert f"optional {tmp_path}/x.so" in render_plugstack_conf(tmp_path / "x.so")
    assert "not built" in render_plugstack_conf(None)


def test_preflight_refuses_ports_in_the_ephemeral_range(tmp_path: Path) -> None:
    from railgang.devcluster.cluster import ephemeral_port_range, preflight
    from railgang.errors import DevClusterError

    lo, _ = ephemeral_port_range()
    spec = ClusterSpec(dir=tmp_path, slurmctld_port=lo + 10, slurmd_base_port=lo + 100)
    with pytest.raises(DevClusterError, match="ephemeral range"):
        preflight(spec)


def test_heartbeat_is_the_daemons_when_configured(tmp_path: Path) -> None:
    from railgang.devcluster.layout import ClusterSpec

    assert ClusterSpec(dir=tmp_path).heartbeat_file == tmp_path / "run" / "railgang" / "heartbeat"
    beat = tmp_path / "state" / "heartbeat"
    assert ClusterSpec(dir=tmp_path, daemon_heartbeat=beat).heartbeat_file == beat
