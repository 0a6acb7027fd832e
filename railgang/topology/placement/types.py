"""Value types of the placement engine: the request, the answer, and why there is no answer.

``GangRequest`` is the one gang request type: the decision core builds it directly (no mirror type
in the daemon), and ``PlacementFailure`` is the one list of failure codes, which the core maps one
to one onto its pending reasons. All frozen. ``Placement.gpus`` and ``Placement.breakdown`` are read-only mappings so a placement
can be shared between the decision core, the simulator and the explain command without copies.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "CLASS_WEIGHTS",
    "GangRequest",
    "JobClass",
    "Placement",
    "PlacementFailure",
    "RankSlot",
    "ScoreWeights",
    "Unplaceable",
]

JobClass = Literal["3d", "dp", "single"]



class PlacementFailure(enum.StrEnum):
    """Why a gang cannot be placed now (the value is what logs, JSON and the CLI show).

    The first three are about the request itself (no amount of freed GPUs helps); the others
    are about the free GPUs right now.
    """

    INVALID_REQUEST = "invalid_request"  # tp*pp*dp != gpus, non-positive sizes, TP wider than any NVLink domain
    GPU_MEMORY = "gpu_memory"  # enough GPUs, but not with min_gpu_mem_gb
    NO_NVLINK_DOMAIN = "no_nvlink_domain"  # enough GPUs, but not on NVLink nodes (needs_nvlink or tp > 1)
    INELIGIBLE_NODES = "ineligible_nodes"  # enough GPUs, but too few on the nodes the gang may use
    INSUFFICIENT_GPUS = "insufficient_gpus"  # fewer free GPUs than requested in the whole fabric
    QUARANTINED = "quarantined"  # enough GPUs only if lame-link nodes were used
    TOPOLOGY_FRAGMENTED = "topology_fragmented"  # enough free GPUs, but not in the gang's shape

    @property
    def about_the_request(self) -> bool:
        """True when the miss is about what the gang needs, not about how many GPUs are free."""
        return self in _ABOUT_THE_REQUEST


_ABOUT_THE_REQUEST = frozenset({PlacementFailure.INVALID_REQUEST, PlacementFailure.GPU_MEMORY,
                                PlacementFailure.NO_NVLINK_DOMAIN})


@dataclass(frozen=True)
class GangRequest:
    """A gang to place: ``gpus`` in total as ``tp`` x ``pp`` x ``dp``.

    ``dp`` defaults to ``gpus // (tp * pp)``; ``job_class`` None is inferred ("single" if the
    gang fits one node and has no pipeline, "3d" if tp or pp > 1, else "dp"). Hashable: two equal
    requests are placeable on exactly the same free sets (the decision core caches failures by it).
    """

    gpus: int
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    job_class: JobClass | None = None
    # capabilities every node must offer, judged on the fabric's facts: for topology's own callers
    # (railgang place --min-gpu-mem/--nvlink); the daemon's core states a job's needs once (its
    # Needs) and passes the nodes meeting them as ``nodes`` (core/model/gang.py gang_for)
    min_gpu_mem_gb: float = 0.0
    needs_nvlink: bool = False
    # the only nodes the gang may use (e.g. those meeting the job's needs); None = any node
    nodes: frozenset[str] | None = None


@dataclass(frozen=True)
class RankSlot:
    """Where one rank runs and what it is in the 3D decomposition."""

    node: str
    gpu: int
    tp_rank: int
    pp_stage: int
    dp_rank: int


@dataclass(frozen=True)
class Unplaceable:
    """Why the gang cannot be placed *now* (data, not an exception)."""

    code: PlacementFailure
    detail: str


@dataclass(frozen=True)
class ScoreWeights:
    """Weights of the locality-cost terms (R-T4/R-T6); the cost is their weighted sum.

    tp: TP groups leaving an NVLink domain; rail: DP peers on different rails; pp: distance
    weight between adjacent pipeline stages; dp: distance weight along each DP ring; pack: nodes
    left partially free (fragmentation).
    """

    tp: float
    rail: float
    pp: float
    dp: float
    pack: float


# R-T6: 3D jobs weight TP locality highest, then rails, then rack locality; pure DP weights rails
# highest; single-node jobs only care about packing.
CLASS_WEIGHTS: Mapping[str, ScoreWeights] = MappingProxyType({
    "3d": ScoreWeights(tp=100.0, rail=10.0, pp=3.0, dp=1.0, pack=0.5),
    "dp": ScoreWeights(tp=100.0, rail=10.0, pp=0.0, dp=3.0, pack=0.5),
    "single": ScoreWeights(tp=0.0, rail=0.0, pp=0.0, dp=0.0, pack=1.0),
})


@dataclass(frozen=True)
class Placement:
    """An exact, all-or-nothing assignment.

    ``gpus`` maps node -> GPU indices; ``ranks`` lists every rank (global rank = position; tp is
    fastest, then pipeline stage, then data-parallel replica); ``cost`` is the weighted locality
    cost and ``breakdown`` its weighted terms (they sum to ``cost``); ``scope`` is the switch the
    winning candidate was searched under (``*``: the whole fabric) and ``candidates`` how many
    distinct candidate layouts were scored.
    """

    gpus: Mapping[str, tuple[int, ...]]
    ranks: tuple[RankSlot, ...]
    cost: float
    breakdown: Mapping[str, float]
    job_class: JobClass = "dp"
    scope: str = ""
    candidates: int = 1

    @property
    def total_gpus(self) -> int:
        """Number of GPUs used."""
        return len(self.ranks)

    @property
    def nodes(self) -> tuple[str, ...]:
        """Nodes used, in the order of ``gpus``."""
        return tuple(self.gpus)
