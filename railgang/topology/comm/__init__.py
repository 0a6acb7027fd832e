"""A physical communication model: collective times from the fabric's links and NCCL's algorithms.

``hardware`` holds datasheet and protocol values (nothing fitted), ``network`` turns a set of
GPUs into edges on the fabric's links and shares links between concurrent collectives max-min
fairly, ``nccl`` prices ring, tree and (NVSwitch gen 3) NVLS / NVLS_TREE all-reduce the way NCCL's
tuner does, ``published`` holds the nccl-tests measurements the model is checked against. ``railgang.topology.comm_model`` keeps the
older entry points (``allreduce_time_s`` …) on top of this package.
"""

from railgang.topology.comm.hardware import DGX_A100, DGX_H100, DGX_H200, SYSTEMS, CommParams
from railgang.topology.comm.model import (
    allreduce_time,
    concurrent_allreduce,
    params_for,
    step_times,
)
from railgang.topology.comm.nccl import CollectiveTime

__all__ = [
    "DGX_A100",
    "DGX_H100",
    "DGX_H200",
    "SYSTEMS",
    "CollectiveTime",
    "CommParams",
    "allreduce_time",
    "concurrent_allreduce",
    "params_for",
    "step_times",
]
