"""Why a job is still pending: data, not exceptions (STYLE 8).

Every pending job the cycle does not start gets exactly one :class:`PendingReason`. ``code`` is a
stable :class:`Reason` the ``explain`` command and the API render; ``detail`` is a one-line human
explanation; ``needed``/``free`` give the numbers behind it.

Placement failures from ``topology`` map one to one onto reasons (:func:`reason_for`): a job that
fits only on quarantined nodes says so, it is not reported as fragmentation. One successful
outcome also maps onto a reason: a multi-node gang the placer could only spread across leaves,
while one leaf could hold it, waits as ``waiting_for_leaf`` when the cycle's leaf wait allows.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from railgang.topology.placement.types import PlacementFailure


class Reason(enum.Enum):
    """Stable reason codes (values are what APIs and logs show)."""

    WAITING_FOR_GPUS = "waiting_for_gpus"  # fewer free GPUs than the job's minimum size
    FRAGMENTED = "fragmented"  # enough GPUs free in total, but no topology-valid gang slot
    QUARANTINED = "quarantined"  # enough GPUs free only on nodes with lame links
    GPU_MEMORY = "gpu_memory"  # too few free GPUs have the memory the job needs
    NO_NVLINK = "no_nvlink"  # too few free GPUs sit in NVLink domains (tp > 1 or needs_nvlink)
    INVALID_SHAPE = "invalid_shape"  # tp × pp × dp cannot be laid out (e.g. TP wider than a domain)
    NEEDS_UNMET = "needs_unmet"  # too few GPUs in the whole cluster meet the job's needs (R-S10)
    NO_ELIGIBLE_CAPACITY = "no_eligible_capacity"  # enough free GPUs, too few on nodes meeting its needs
    LARGER_THAN_CLUSTER = "larger_than_cluster"  # can never run on this cluster (rejected)
    QUOTA = "quota"  # the account's GPU quota would be exceeded
    QUOTA_TEAM = "quota_team"  # the team's quota (burst limit, else guarantee) binds
    QUOTA_DEPARTMENT = "quota_department"  # the department's Q less its other teams' use binds
    QUOTA_ORG = "quota_org"  # the organisation's Q less everybody else's use binds
    RECLAIMING = "reclaiming"  # borrowed work was signalled so the owner's guaranteed job can run
    PRIORITY = "priority"  # waiting behind higher-priority work (blocking FIFO head, reservation)
    RESERVED = "reserved"  # this job holds the backfill reservation (start time guaranteed)
    PREEMPTING = "preempting"  # lower work was signalled for it; starts when grace expires
    PREEMPTION_BUDGET = "preemption_budget"  # would need preemption, but a budget forbids it
    CASCADE_DAMPED = "cascade_damped"  # was itself evicted recently, may not evict others yet
    WAITING_FOR_LEAF = "waiting_for_leaf"  # placeable now only across leaves; one leaf could hold
    # it, so it waits (within CycleConfig.leaf_wait_s of its submit) and holds a leaf meanwhile


class PendingReason(NamedTuple):
    """Reason data for one job left pending.

    A named tuple, as :class:`~railgang.daemon.core.model.want.Want` is: a cycle builds one per
    waiting job. As immutable; ``_replace`` stands for ``dataclasses.replace``."""

    job_id: str
    code: Reason
    detail: str = ""
    needed: int = 0  # GPUs the job needs (its minimum start size)
    free: int = 0  # GPUs free when it was considered

    def render(self) -> str:
        return f"{self.job_id}: {self.code.value} (needs {self.needed}, free {self.free}) {self.detail}".rstrip()


_FOR_FAILURE: Mapping[PlacementFailure, Reason] = MappingProxyType({
    PlacementFailure.INSUFFICIENT_GPUS: Reason.WAITING_FOR_GPUS,
    PlacementFailure.TOPOLOGY_FRAGMENTED: Reason.FRAGMENTED,
    PlacementFailure.QUARANTINED: Reason.QUARANTINED,
    PlacementFailure.GPU_MEMORY: Reason.GPU_MEMORY,
    PlacementFailure.NO_NVLINK_DOMAIN: Reason.NO_NVLINK,
    PlacementFailure.INVALID_REQUEST: Reason.INVALID_SHAPE,
    PlacementFailure.INELIGIBLE_NODES: Reason.NO_ELIGIBLE_CAPACITY,
})


def reason_for(failure: PlacementFailure) -> Reason:
    """The pending reason of a placement failure (total and one to one; a test pins both)."""
    return _FOR_FAILURE[failure]


__all__ = ["PendingReason", "Reason", "reason_for"]
