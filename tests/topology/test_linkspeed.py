"""topology.conf's LinkSpeed in the physical communication model (read as Gb/s per switch port,
docs/topology.md "Communication model"): a slower LinkSpeed raises the modeled step time, a
LinkSpeed at or above the NIC's rate changes nothing, and no LinkSpeed falls back to the NIC's
datasheet rate."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.topology.comm import DGX_H100, step_times
from railgang.topology.comm.hardware import NDR, ib_payload_efficiency
from railgang.topology.comm.network import link_capacity
from railgang.topology.fabric import Fabric, load_fabric
from railgang.topology.occupancy import all_free
from railgang.topology.placement import GangRequest, Placement, place


def _conf(tmp_path: Path, leaf: str = "", spine: str = "") -> Fabric:
    text = (f"SwitchName=leaf1 Nodes=gpu[001-002] {leaf}\n"
            f"SwitchName=leaf2 Nodes=gpu[003-004] {leaf}\n"
            f"SwitchName=spine Switches=leaf[1-2] {spine}\n")
    path = tmp_path / f"topology-{abs(hash(text))}.conf"
    path.write_text(text)
    return load_fabric(path)


def _step(fabric: Fabric) -> dict[str, float]:
    # 32 GPUs = every node of both leaves: the DP all-reduce crosses the leaves and the spine
    p = place(fabric, all_free(fabric), GangRequest(32, tp=8, pp=1, dp=4))
    assert isinstance(p, Placement)
    return step_times(fabric, p, 8e9, 64e6, params=DGX_H100)


def test_slower_linkspeed_raises_step_time(tmp_path: Path) -> None:
    base = _step(_conf(tmp_path))
    ndr = _step(_conf(tmp_path, "LinkSpeed=400", "LinkSpeed=400"))
    hdr = _step(_conf(tmp_path, "LinkSpeed=200", "LinkSpeed=200"))
    spine_only = _step(_conf(tmp_path, spine="LinkSpeed=100"))
    assert ndr["total"] == pytest.approx(base["total"])  # the NIC's own rate: nothing changes
    assert hdr["dp"] == pytest.approx(2 * base["dp"], rel=0.25)  # half the port rate, ~twice the time
    assert hdr["total"] > base["total"] * 1.3
    assert spine_only["dp"] > base["dp"] * 1.3  # a slow spine alone slows the cross-leaf ring
    assert hdr["tp"] == pytest.approx(base["tp"])  # NVLink inside a node is not a switch port


def test_linkspeed_caps_link_capacity(tmp_path: Path) -> None:
    fabric = _conf(tmp_path, "LinkSpeed=200")
    hdr_port = 200 / 8 * ib_payload_efficiency()
    assert link_capacity(fabric, DGX_H100, ("nic", "gpu001", 0, "tx"), None) == pytest.approx(hdr_port)
    assert link_capacity(fabric, DGX_H100, ("up", "leaf1", 0), None) == pytest.approx(2 * hdr_port)
    # a faster LinkSpeed than the NIC cannot make the NIC faster
    fast = _conf(tmp_path, "LinkSpeed=800")
    assert link_capacity(fast, DGX_H100, ("nic", "gpu001", 0, "tx"), None) == pytest.approx(NDR.gbps)
    # another unit: LinkSpeed in Mb/s with the factor set
    mbit = DGX_H100.with_(linkspeed_gbit_per_unit=0.001)
    slow = _conf(tmp_path, "LinkSpeed=200000")
    assert link_capacity(slow, mbit, ("nic", "gpu001", 0, "tx"), None) == pytest.approx(hdr_port)
