"""Shared helpers for simulator tests: shapes, a first-fit placer, a trace-job builder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from railgang.daemon.core.model.gang import GangRequest, Placed
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.placement import PlacementFailure, Unplaceable


def first_fit(fabric: Any, free: Mapping[str, frozenset[int]], spec: GangRequest, *,
              health: Any = None, seed: int = 0) -> Placed | Unplaceable:
    """Lowest node, lowest GPU first: placements tests can predict exactly."""
    out: dict[str, tuple[int, ...]] = {}
    need = spec.gpus
    for node in sorted(free):
        take = sorted(free[node])[:need]
        if take:
            out[node] = tuple(take)
            need -= len(take)
        if need == 0:
            return Placed(out)
    return Unplaceable(PlacementFailure.INSUFFICIENT_GPUS, f"{spec.gpus} GPUs wanted")


def tj(job_id: str, submit: float, gpus: int, duration: float, **kw: Any) -> TraceJob:
    return TraceJob(job_id=job_id, submit_time=submit, gpus=gpus, duration_s=duration, **kw)


@pytest.fixture
def one_node() -> Any:
    return fabric_from_shape(1, 8, 1)


@pytest.fixture
def two_nodes() -> Any:
    return fabric_from_shape(2, 8, 2)
