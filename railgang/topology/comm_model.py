"""Modeled collective times, so placement quality is measured in seconds.

The entry points other packages use (``allreduce_time_s``, ``ring_allreduce_time_s``,
``step_comm_time_s``), on top of the physical model in ``railgang.topology.comm``: per-link
bandwidth and latency from datasheets (NVLink, each HCA/rail, switch uplinks with their
oversubscription, hop count), NCCL's ring and tree cost structure, PXN for cross-rail sends, and
max-min fair sharing of links. ``params`` None picks the named system matching the fabric's GPU
type (default: DGX H100). docs/topology.md "Communication model" has the equations and sources.
"""

from __future__ import annotations

from collections.abc import Sequence

from railgang.topology.comm.hardware import CommParams
from railgang.topology.comm.model import allreduce_time, params_for, step_times
from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement.types import Placement

__all__ = [
    "DEFAULT_PARAMS",
    "CommParams",
    "allreduce_time_s",
    "ring_allreduce_time_s",
    "step_comm_time_s",
]

DEFAULT_PARAMS = CommParams()


def ring_allreduce_time_s(
    fabric: Fabric,
    gpus: Sequence[tuple[str, int]],
    nbytes: float,
    *,
    health: LinkHealth | None = None,
    params: CommParams | None = None,
) -> float:
    """Modeled NCCL ring all-reduce of ``nbytes`` over ``gpus`` ((node, gpu index) pairs)."""
    return allreduce_time(fabric, gpus, nbytes, health=health, params=params or params_for(fabric),
                          algorithm="ring").seconds


def allreduce_time_s(
    fabric: Fabric,
    placement: Placement,
    nbytes: float,
    *,
    health: LinkHealth | None = None,
    params: CommParams | None = None,
) -> float:
    """Modeled all-reduce of ``nbytes`` across every GPU of ``placement`` (NCCL's faster of ring
    and tree)."""
    gpus = [(r.node, r.gpu) for r in placement.ranks]
    return allreduce_time(fabric, gpus, nbytes, health=health, params=params or params_for(fabric)).seconds


def step_comm_time_s(
    fabric: Fabric,
    placement: Placement,
    grad_bytes: float,
    activation_bytes: float,
    *,
    health: LinkHealth | None = None,
    params: CommParams | None = None,
) -> dict[str, float]:
    """Communication of one 3D-parallel step, by kind, without overlap (``tp``, ``pp``, ``dp``,
    ``total``); concurrent groups share links (see ``railgang.topology.comm.step_times``)."""
    return step_times(fabric, placement, grad_bytes, activation_bytes, health=health,
                      params=params or params_for(fabric))
