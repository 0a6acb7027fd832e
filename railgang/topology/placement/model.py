"""Request normalisation and eligibility: which NVLink domains can take part in a placement, and
why none can (R-T4: every resource dimension — GPU count, memory, NVLink, link health).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement.types import GangRequest, JobClass, PlacementFailure, Unplaceable

__all__ = ["Container", "Shape", "eligible_containers", "normalise"]


@dataclass(frozen=True)
class Shape:
    """A validated request: ``units`` TP groups of ``tp`` GPUs, ``pp`` stages x ``dp`` replicas."""

    gpus: int
    tp: int
    pp: int
    dp: int
    job_class: JobClass

    @property
    def units(self) -> int:
        return self.pp * self.dp


@dataclass(frozen=True)
class Container:
    """An NVLink domain (usually one node) with its usable free GPUs, in topology order.

    ``slots`` holds (node, free indices) per member node; the sorted views are computed on first
    use only, because a large cluster has hundreds of containers and a search touches few of them.
    """

    name: str
    slots: tuple[tuple[str, frozenset[int]], ...]
    count: int
    units: int
    first: str
    leaf: str

    @property
    def single_node(self) -> bool:
        return len(self.slots) == 1

    @cached_property
    def indices(self) -> tuple[int, ...]:
        """Sorted free indices (of the first node, for a multi-node domain)."""
        return tuple(sorted(self.slots[0][1]))

    @cached_property
    def free(self) -> tuple[tuple[str, int], ...]:
        """Every free (node, index), node by node."""
        return tuple((n, i) for n, idxs in self.slots for i in sorted(idxs))


def normalise(request: GangRequest, fabric: Fabric) -> Shape | Unplaceable:
    """Check sizes and infer dp and the job class."""
    tp, pp, gpus = request.tp, request.pp, request.gpus
    if gpus < 1 or tp < 1 or pp < 1 or (request.dp is not None and request.dp < 1):
        return Unplaceable(PlacementFailure.INVALID_REQUEST, "gpus, tp, pp and dp must be positive")
    dp = request.dp if request.dp is not None else gpus // (tp * pp)
    if tp * pp * dp != gpus:
        return Unplaceable(PlacementFailure.INVALID_REQUEST, f"tp*pp*dp = {tp}*{pp}*{dp} = {tp * pp * dp} != gpus = {gpus}")
    if tp > fabric.max_domain_gpus:
        return Unplaceable(PlacementFailure.INVALID_REQUEST,
                           f"tp={tp} is wider than the largest NVLink domain ({fabric.max_domain_gpus} GPUs)")
    job_class = request.job_class
    if job_class is None:
        if pp == 1 and gpus <= fabric.max_node_gpus and (tp == 1 or tp == gpus):
            job_class = "single"
        elif tp > 1 or pp > 1:
            job_class = "3d"
        else:
            job_class = "dp"
    return Shape(gpus, tp, pp, dp, job_class)


def usable_indices(idxs: frozenset[int], gpus: int) -> frozenset[int]:
    """``idxs`` without indices a node does not have (a malformed free map must not crash us)."""
    if idxs and (max(idxs) >= gpus or min(idxs) < 0):
        return frozenset(i for i in idxs if 0 <= i < gpus)
    return idxs


def eligible_containers(
    fabric: Fabric,
    free: Mapping[str, frozenset[int]],
    request: GangRequest,
    shape: Shape,
    health: LinkHealth | None,
    *,
    min_units: int = 0,
) -> list[Container] | Unplaceable:
    """Containers (NVLink domains) whose free GPUs meet every resource dimension, or why none do.

    With ``min_units`` > 0, nodes that cannot hold that many TP groups are left out (a gang search
    never uses them, and building them is most of the cost on a large, fragmented cluster).
    """
    need_nvlink = request.needs_nvlink or shape.tp > 1
    lame = health.quarantined if (health is not None and shape.job_class != "single") else {}
    min_mem = request.min_gpu_mem_gb
    total = mem_ok = link_ok = 0
    rows: list[tuple[int, str, str, frozenset[int]]] = []
    for node, idxs in free.items():
        if not idxs:
            continue
        hot = fabric.hot(node)
        if hot is None:
            continue
        gpus, mem, nvlink, index, leaf = hot
        idxs = usable_indices(idxs, gpus)
        n = len(idxs)
        total += n
        if mem < min_mem:
            continue
        mem_ok += n
        if need_nvlink and not nvlink:
            continue
        link_ok += n
        if node in lame:
            continue
        if n:
            rows.append((index, node, leaf, idxs))
    g = shape.gpus
    if total < g:
        return Unplaceable(PlacementFailure.INSUFFICIENT_GPUS, f"{g} GPUs requested, {total} free")
    if mem_ok < g:
        return Unplaceable(PlacementFailure.GPU_MEMORY, f"{mem_ok} free GPUs have >= {min_mem:g} GB, {g} needed")
    if link_ok < g:
        return Unplaceable(PlacementFailure.NO_NVLINK_DOMAIN, f"{link_ok} free GPUs are on NVLink nodes, {g} needed")
    if sum(len(r[3]) for r in rows) < g:
        return Unplaceable(PlacementFailure.QUARANTINED, f"only {sum(len(r[3]) for r in rows)} free GPUs avoid "
                                          f"quarantined nodes, {g} needed")
    rows.sort()
    tp = shape.tp
    if not fabric.multi_node_domains:
        floor = min_units * tp
        return [Container(node, ((node, idxs),), n, n // tp, node, leaf)
                for _, node, leaf, idxs in rows if (n := len(idxs)) >= floor]
    per_domain: dict[str, list[tuple[str, frozenset[int]]]] = {}
    leaf_of: dict[str, str] = {}
    for _, node, leaf, idxs in rows:
        domain = fabric.domain_of(node)
        per_domain.setdefault(domain, []).append((node, idxs))
        leaf_of.setdefault(domain, leaf)
    out = []
    for d, slots in per_domain.items():
        n = sum(len(i) for _, i in slots)
        out.append(Container(d, tuple(slots), n, n // tp, slots[0][0], leaf_of[d]))
    return out
