"""A replay runs the cyclic garbage collector rarely (issue 12, speed) and leaves the process's
collector as it found it, also when the replay fails."""

from __future__ import annotations

import gc

import pytest

from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim import engine
from railgang.daemon.sim.engine import REPLAY_GC_THRESHOLD, simulate
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape


def test_a_replay_collects_rarely_and_restores_the_collector() -> None:
    before, seen = gc.get_threshold(), []
    fabric = fabric_from_shape(2, 8, 2)
    jobs = [TraceJob(f"j{i}", 10.0 * i, 4, 100.0) for i in range(6)]
    run = simulate(jobs, get("fifo"), fabric,
                   observer=lambda now, backend: seen.append(gc.get_threshold()[0]))
    assert run.metrics.finished == 6
    assert seen and min(seen) >= REPLAY_GC_THRESHOLD
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_failing_replay_restores_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    before = gc.get_threshold()

    def boom(self: object) -> None:
        raise RuntimeError("replay failed")

    monkeypatch.setattr(engine._Replay, "run", boom)
    with pytest.raises(RuntimeError, match="replay failed"):
        simulate([TraceJob("a", 0.0, 1, 1.0)], get("fifo"), fabric_from_shape(1, 8, 1))
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
