"""``slurm.blocks_nvlink``: on topology/block, each block becomes one multi-node NVLink domain of
the fabric the CLI backend builds (GB200 NVL72 racks), so the placer keeps TP groups in a block."""

from __future__ import annotations

from pathlib import Path

from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.slurm.cli import CliBackend
from railgang.daemon.slurm.cli.records import SinfoNode
from railgang.daemon.slurm.cli.runner import SlurmRunner

NODES = [SinfoNode(f"gb{i:02d}", 4, NodeState("idle"), "", frozenset()) for i in range(1, 9)]


def _fabric(tmp_path: Path, nvlink: bool):  # type: ignore[no-untyped-def]
    topo = tmp_path / "topology.conf"
    topo.write_text("BlockName=rack1 Nodes=gb[01-04]\nBlockName=rack2 Nodes=gb[05-08]\nBlockSizes=4,8\n")
    backend = CliBackend(SlurmSettings(topology=topo, blocks_nvlink=nvlink), SlurmRunner(), read_shares=False)
    return backend._fabric_for(NODES)


def test_blocks_are_nvlink_domains_when_the_setting_says_so(tmp_path: Path) -> None:
    fabric = _fabric(tmp_path, True)
    assert fabric.domain_of("gb02") == fabric.domain_of("gb04") == "rack1" != fabric.domain_of("gb05")
    assert fabric.max_domain_gpus == 16


def test_by_default_a_block_is_a_leaf_and_each_node_its_own_domain(tmp_path: Path) -> None:
    fabric = _fabric(tmp_path, False)
    assert fabric.leaf_of("gb02") == fabric.leaf_of("gb04") and fabric.domain_of("gb02") == "gb02"
