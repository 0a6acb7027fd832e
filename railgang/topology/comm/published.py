"""Published nccl-tests ``all_reduce_perf`` results for named systems, and the model's error on each.

Each case is what someone ran and posted (system, ranks, message size, measured bus bandwidth
with its address); the model rebuilds that system from datasheet values only (``hardware``) on
a one-leaf fabric and predicts the bus bandwidth. Nothing here feeds back into the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from railgang.topology.comm.hardware import A100_SXM, DGX_A100, DGX_H100, HDR, CommParams
from railgang.topology.comm.model import allreduce_time
from railgang.topology.comm.nccl import Algorithm
from railgang.topology.fabric import fabric_from_shape

__all__ = ["CASES", "Case", "Result", "evaluate"]


@dataclass(frozen=True)
class Case:
    """One published measurement."""

    system: str
    params: CommParams
    nodes: int
    gpus_per_node: int
    nbytes: float
    busbw_gbps: float         # measured bus bandwidth, GB/s
    source: str               # where it was published
    algorithm: Algorithm = "auto"
    note: str = ""


# 8 x A100 SXM4 with 4 HDR HCAs per node (nccl-tests #119, #175 describe such nodes).
_A100_4HDR = CommParams(gpu=A100_SXM, nic=HDR, nics_per_node=4)

CASES: tuple[Case, ...] = (
    Case("8x A100-SXM4 (1 node, NVSwitch)", DGX_A100, 1, 8, 4 * 2**30, 232.54,
         "https://github.com/NVIDIA/nccl-tests/issues/175", note="single-node run in the issue"),
    Case("8x A100-SXM4-80GB, HPE Apollo 6500 (1 node)", DGX_A100, 1, 8, 2**30, 200.0,
         "https://github.com/NVIDIA/nccl-tests/issues/149", note="'~200 GB/s', -t 8 threads"),
    Case("3 nodes x 8 A100-SXM4-40GB, 4x HDR per node", _A100_4HDR, 3, 8, 133169160, 95.74,
         "https://github.com/NVIDIA/nccl-tests/issues/119", note="largest size run: 127 MiB"),
    Case("2 nodes x 8 A100, 4x HDR 200G per node", _A100_4HDR, 2, 8, 4 * 2**30, 86.0,
         "https://github.com/NVIDIA/nccl-tests/issues/175", note="reporter calls it below expectation"),
    Case("8x H100-SXM5 (1 node), NCCL_ALGO=Ring", DGX_H100, 1, 8, 8 * 2**30, 370.0,
         "https://github.com/NVIDIA/nccl-tests/issues/212", algorithm="ring",
         note="NVIDIA's answer: ~370 GB/s with Ring"),
    Case("8x H100-SXM5 (1 node), default (NVLS)", DGX_H100, 1, 8, 8 * 2**30, 480.0,
         "https://github.com/NVIDIA/nccl-tests/issues/212",
         note="NVLink SHARP: NCCL's NVLS rule"),
    Case("4 nodes x 8 H100 (HGX), 8x 400G per node", DGX_H100, 4, 8, 16 * 2**30, 365.84,
         "https://github.com/NVIDIA/nccl-tests/issues/309"),
    Case("2 nodes x 8 H100 (HGX), 8x 400G per node", DGX_H100, 2, 8, 16 * 2**30, 470.0,
         "https://github.com/NVIDIA/nccl-tests/issues/309", note="NCCL's NVLS_TREE rule"),
)


@dataclass(frozen=True)
class Result:
    """The model's prediction for one case."""

    case: Case
    busbw_gbps: float
    algorithm: str

    @property
    def error(self) -> float:
        """(model - measured) / measured."""
        return (self.busbw_gbps - self.case.busbw_gbps) / self.case.busbw_gbps


def evaluate(case: Case) -> Result:
    """Predict ``case``: its nodes on one leaf of a non-blocking fabric, all GPUs in the ring."""
    fabric = fabric_from_shape(case.nodes, case.gpus_per_node, nodes_per_leaf=max(case.nodes, 1))
    gpus = [(n, g) for n in fabric.nodes for g in range(case.gpus_per_node)]
    t = allreduce_time(fabric, gpus, case.nbytes, params=case.params, algorithm=case.algorithm)
    return Result(case, t.busbw_gbps, t.algorithm)
