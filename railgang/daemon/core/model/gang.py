"""The core's seam to the topology placement engine (all-or-nothing gangs).

The core never searches placements itself: it asks for a gang with topology's own
:class:`~railgang.topology.placement.GangRequest` (:func:`gang_for` builds it from a job) and gets
back :class:`Placed` or topology's :class:`~railgang.topology.placement.Unplaceable`, whose
``code`` maps one to one onto a pending reason (``reasons.reason_for``). :func:`topology_placer`
forwards to ``railgang.topology.placement.place``; tests may inject another :class:`Placer` (e.g.
a first-fit fake), which is why the seam is a Protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from railgang.daemon.core.model.job import Assignment, Job
from railgang.topology.placement.types import GangRequest, Unplaceable


def gang_for(job: Job, replicas: int, nodes: frozenset[str] | None = None) -> GangRequest:
    """The gang ``replicas`` DP replicas of ``job`` need (whole TP × PP groups), on ``nodes``
    only when given (the nodes meeting the job's needs: ``Work.eligible``).

    The job's needs (GPU memory, NVLink, ...) reach the placer only as those nodes, judged on the
    snapshot's node facts: the request's own ``min_gpu_mem_gb`` and ``needs_nvlink`` are for
    topology's other callers (``railgang place``), so a need is checked once, on one set of facts."""
    return GangRequest(gpus=replicas * job.replica_gpus, tp=job.tp, pp=job.pp, dp=replicas, nodes=nodes)


@dataclass(frozen=True)
class Placed:
    """Where a gang goes: the exact GPUs and topology's locality cost (lower is better)."""

    assignment: Assignment
    cost: float = 0.0


class Placer(Protocol):
    def __call__(
        self,
        fabric: Any,
        free: Mapping[str, frozenset[int]],
        request: GangRequest,
        *,
        health: Any = None,
        seed: int = 0,
    ) -> Placed | Unplaceable: ...


def topology_placer(
    fabric: Any,
    free: Mapping[str, frozenset[int]],
    request: GangRequest,
    *,
    health: Any = None,
    seed: int = 0,
) -> Placed | Unplaceable:
    """Place through ``railgang.topology.placement.place`` (imported on first use: the search
    modules are only needed when a real fabric is searched)."""
    from railgang.topology.placement import place

    result = place(fabric, free, request, health=health, seed=seed)
    if isinstance(result, Unplaceable):
        return result
    assignment = {str(n): tuple(int(i) for i in g) for n, g in result.gpus.items() if len(g)}
    return Placed(assignment, float(result.cost))


__all__ = ["GangRequest", "Placed", "Placer", "Unplaceable", "gang_for", "topology_placer"]
