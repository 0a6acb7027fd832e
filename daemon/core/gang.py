"""The core's seam to the topology placement engine (all-or-nothing gangs).

The core never searches placements itself: :func:`topology_placer` forwards a :class:`GangSpec`
to ``railgang.topology.placement.place`` and converts the answer into :class:`Placed` or
:class:`NotPlaced`. Tests may inject another :class:`Placer` (e.g. a first-fit fake), which is why
the seam is a Protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast

from railgang.daemon.core.job import Assignment, Job


@dataclass(frozen=True)
class GangSpec:
    """One gang request (mirrors ``railgang.topology.placement.GangRequest``)."""

    gpus: int
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    job_class: str | None = None  # topology workload class ("3d", "dp", "single"); None = inferred
    min_gpu_mem_gb: float = 0.0
    needs_nvlink: bool = False

    @staticmethod
    def for_job(job: Job, replicas: int) -> GangSpec:
        return GangSpec(
            gpus=replicas * job.replica_gpus,
            tp=job.tp,
            pp=job.pp,
            dp=replicas,
            min_gpu_mem_gb=job.min_gpu_mem_gb,
            needs_nvlink=job.needs_nvlink,
        )

    @property
    def key(self) -> tuple[int, int, int, float, bool]:
        """Shape key: two specs with one key are placeable on exactly the same free sets."""
        return (self.gpus, self.tp, self.pp, self.min_gpu_mem_gb, self.needs_nvlink)


@dataclass(frozen=True)
class Placed:
    assignment: Assignment
    cost: float = 0.0


@dataclass(frozen=True)
class NotPlaced:
    code: str
    detail: str = ""

    @property
    def capability(self) -> bool:
        """True when the miss is about what the job needs (GPU memory, NVLink, an impossible shape)
        rather than how many GPUs are free (``railgang.topology.placement.UNPLACEABLE_CODES``)."""
        return self.code in ("gpu_memory", "no_nvlink_domain", "invalid_request")


class Placer(Protocol):
    def __call__(
        self,
        fabric: Any,
        free: Mapping[str, frozenset[int]],
        spec: GangSpec,
        *,
        health: Any = None,
        seed: int = 0,
    ) -> Placed | NotPlaced: ...


def topology_placer(
    fabric: Any,
    free: Mapping[str, frozenset[int]],
    spec: GangSpec,
    *,
    health: Any = None,
    seed: int = 0,
) -> Placed | NotPlaced:
    """Place through ``railgang.topology.placement.place`` (imported lazily: the core stays importable)."""
    from railgang.topology.placement import GangRequest, Unplaceable, place

    request = GangRequest(
        gpus=spec.gpus,
        tp=spec.tp,
        pp=spec.pp,
        dp=spec.dp,
        job_class=cast(Any, spec.job_class),
        min_gpu_mem_gb=spec.min_gpu_mem_gb,
        needs_nvlink=spec.needs_nvlink,
    )
    result = place(fabric, free, request, health=health, seed=seed)
    if isinstance(result, Unplaceable):
        return NotPlaced(str(result.code), str(getattr(result, "detail", "")))
    gpus: Mapping[str, Any] = result.gpus
    assignment = {str(n): tuple(int(i) for i in g) for n, g in gpus.items() if len(g)}
    return Placed(assignment, float(getattr(result, "cost", 0.0)))


__all__ = ["GangSpec", "NotPlaced", "Placed", "Placer", "topology_placer"]
