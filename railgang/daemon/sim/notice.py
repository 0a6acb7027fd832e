"""Shrinks with notice in the simulator (issue 39): the model of what the Slurm backend does for a
``Resize`` with ``grace_s > 0`` (slurm/cli/apply.py). The job is signalled and keeps every GPU it
holds until the grace is over, shown to the core as in flight (``SimJob.notice_until``, the
running view's ``preempt_deadline``); then the shrink takes effect and pays its transition time
as any shrink does. The simulator never takes the job's early "ready": the daemon may shrink
sooner, never later, so the simulated cost is the notice's bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from railgang.daemon.core.model.actions import Resize
from railgang.daemon.sim.accounting import SimJob

SHRINK = "shrink"  # the event at the end of a notice (job_id: the job; version: the notice's)


class ShrinkNotices:
    """The shrinks waiting for their notice to end, by job id."""

    def __init__(self) -> None:
        self.waiting: dict[str, tuple[int, Resize]] = {}  # job id -> (notice number, the shrink)
        self._seq = 0

    def give(self, sj: SimJob, action: Resize, now: float, events: Any) -> None:
        """Signal ``sj`` for ``action``: its shrink is due at the end of the grace (an event)."""
        self._seq += 1
        self.waiting[sj.tj.job_id] = (self._seq, action)
        sj.notice_until, sj.shrink_to = now + action.grace_s, action.replicas
        sj.changed()
        events.at(sj.notice_until, SHRINK, sj.tj.job_id, self._seq)

    def due(self, job_id: str, version: int, running: Mapping[str, SimJob]) -> Resize | None:
        """The shrink whose notice ended, the job out of its notice (None: it left, or it was
        signalled by a reclaim or a fault meanwhile and goes whole)."""
        got, sj = self.waiting.get(job_id), running.get(job_id)
        if got is None or got[0] != version or sj is None:
            return None
        del self.waiting[job_id]
        sj.notice_until = sj.shrink_to = None
        sj.changed()
        return got[1] if sj.kill_at is None else None

    def drop(self, sj: SimJob) -> None:
        """The job finished or was killed inside its notice: its shrink will not come."""
        self.waiting.pop(sj.tj.job_id, None)
        sj.notice_until = sj.shrink_to = None


__all__ = ["SHRINK", "ShrinkNotices"]
