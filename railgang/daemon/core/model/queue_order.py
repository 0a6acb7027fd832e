"""FIFO's order of a queue: every job at its requested size (all or nothing) by submit time, then
job id. Its own module because the snapshot's index (``model/snapshot.py``) keeps or derives it
and the plans (``model/plan.py``) read it."""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.want import Want

SUBMIT_ORDER = attrgetter("submit_time", "job_id")  # FIFO's key of a request: submit time, then job id
_REQUEST = attrgetter("request")


def rigid_by_submit(pending: Iterable[Job]) -> tuple[Want, ...]:
    """``Want(job, k, k)`` of every job at its requested size (all or nothing), ordered by 1.
    submit time, 2. job id: FIFO's plan order. A backend that keeps it between cycles hands it
    over in ``SnapshotIndex.submit_order`` (the simulator does: jobs enter and leave it one by one)."""
    requests = sorted(map(_REQUEST, pending), key=SUBMIT_ORDER)
    return tuple([Want(r.job_id, r.replicas, r.replicas) for r in requests])


__all__ = ["SUBMIT_ORDER", "rigid_by_submit"]
