"""The NVL-style block fabric the whole-domain tests share: four blocks of four 4-GPU nodes
(gb01-gb16, ``blocks_are_nvlink``: each block one NVLink domain), 64 GPUs."""

from __future__ import annotations

from railgang.daemon.core import Node
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf

GPN, PER, BLOCKS = 4, 4, 4
NAMES = [f"gb{i:02d}" for i in range(1, BLOCKS * PER + 1)]
FAB = fabric_from_conf(parse_topology("".join(
    f"BlockName=b{b + 1} Nodes=gb[{b * PER + 1:02d}-{(b + 1) * PER:02d}]\n" for b in range(BLOCKS))
    + "BlockSizes=4,8,16\n", "<test>"), default_gpus=GPN, blocks_are_nvlink=True)
NODES = [Node(n, GPN) for n in NAMES]
