"""Why a job is still pending: data, not exceptions (STYLE 8).

Every pending job the cycle does not start gets exactly one :class:`PendingReason`. ``code`` is a
stable :class:`Reason` the ``explain`` command and the API render; ``detail`` is a one-line human
explanation; ``needed``/``free`` give the numbers behind it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reason(enum.Enum):
    """Stable reason codes (values are what APIs and logs show)."""

    WAITING_FOR_GPUS = "waiting_for_gpus"  # fewer free GPUs than the job's minimum size
    FRAGMENTED = "fragmented"  # enough GPUs free in total, but no topology-valid gang slot
    CAPABILITY = "capability"  # no node meets GPU memory / NVLink needs
    LARGER_THAN_CLUSTER = "larger_than_cluster"  # can never run on this cluster (rejected)
    QUOTA = "quota"  # the account's GPU quota would be exceeded
    PRIORITY = "priority"  # waiting behind higher-priority work (blocking FIFO head, reservation)
    RESERVED = "reserved"  # this job holds the backfill reservation (start time guaranteed)
    PREEMPTING = "preempting"  # lower work was signalled for it; starts when grace expires
    PREEMPTION_BUDGET = "preemption_budget"  # would need preemption, but a budget forbids it
    CASCADE_DAMPED = "cascade_damped"  # was itself evicted recently, may not evict others yet


@dataclass(frozen=True)
class PendingReason:
    """Reason data for one job left pending."""

    job_id: str
    code: Reason
    detail: str = ""
    needed: int = 0  # GPUs the job needs (its minimum start size)
    free: int = 0  # GPUs free when it was considered

    def render(self) -> str:
        return f"{self.job_id}: {self.code.value} (needs {self.needed}, free {self.free}) {self.detail}".rstrip()


__all__ = ["PendingReason", "Reason"]
