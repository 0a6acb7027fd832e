from __future__ import annotations

import random

import pytest

from railgang.daemon.backend import Backend
from railgang.daemon.clock import Clock, SimClock, WallClock
from railgang.daemon.core.model.actions import Start
from railgang.daemon.core.model.job import Job, JobRequest
from railgang.daemon.core.model.snapshot import Node, make_snapshot
from railgang.daemon.core.policies.registry import get
from railgang.daemon.loop import run_cycle
from railgang.daemon.slurm.fake import FakeBackend
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.sim.conftest import first_fit


def snapshot(now: float = 0.0):  # type: ignore[no-untyped-def]
    fabric = fabric_from_shape(1, 8, 1)
    return make_snapshot(now=now, fabric=fabric, nodes=[Node("n01", 8)],
                         pending=[Job(JobRequest("a", 4, submit_time=0.0)),
                                  Job(JobRequest("b", 8, submit_time=1.0))])


def test_cycle_observes_at_clock_time_decides_and_applies() -> None:
    backend = FakeBackend(snapshot())
    clock = SimClock(42.0)
    outcome = run_cycle(backend, get("fifo"), clock, random.Random(0), placer=first_fit)
    assert isinstance(backend, Backend) and backend.observed == [42.0]
    assert [a.job_id for a in outcome.actions if isinstance(a, Start)] == ["a"]
    assert backend.applied == [(42.0, outcome.actions[0])]
    assert [r.job_id for r in outcome.reasons] == ["b"] and outcome.failed == []


def test_refused_action_is_reported_not_raised() -> None:
    backend = FakeBackend(snapshot(), refuse=lambda action: "node went down")
    outcome = run_cycle(backend, get("fifo"), SimClock(), random.Random(0), placer=first_fit)
    (failed,) = outcome.failed
    assert failed.detail == "node went down" and backend.applied == []


def test_sim_clock_moves_forward_only() -> None:
    clock = SimClock(10.0)
    clock.advance(5.0)
    clock.advance_to(20.0)
    assert clock.now() == 20.0
    with pytest.raises(ValueError, match="back"):
        clock.advance_to(19.0)
    assert isinstance(clock, Clock) and isinstance(WallClock(), Clock)
    assert WallClock().now() > 1e9
