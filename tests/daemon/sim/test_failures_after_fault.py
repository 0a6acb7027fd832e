"""The simulator marks a job a fault requeued ``after_fault`` (first in its class), as the daemon
does, and clears the mark once it runs again (issue 20; docs/failures.md)."""

from __future__ import annotations

from railgang.daemon.core.policies import registry
from railgang.daemon.failures.rates import FailureRates
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.failures import FailureConfig
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

HOUR = 3600.0


def test_a_fault_requeue_is_marked_until_the_job_runs_again() -> None:
    seen: list[tuple[bool, bool]] = []  # (waiting, after_fault) of job "a" after each cycle

    def watch(now: float, backend: SimBackend) -> None:
        sj = backend.jobs.get("a")
        if sj is not None:
            seen.append((sj.assignment is None, sj.job.state.after_fault))

    config = EngineConfig(failures=FailureConfig(rates=FailureRates(0.0, 0.5, 0.0, repair_s=600.0)))
    run = simulate([TraceJob("a", 0.0, 32, 6 * HOUR), TraceJob("b", 1.0, 32, 6 * HOUR)],
                   registry.get("fifo"), fabric_from_shape(8, 8, 4), config=config, observer=watch)
    assert run.records[0].interruptions > 0
    assert not any(mark for waiting, mark in seen if not waiting)  # never marked while running
    assert seen[0] == (False, False)  # a first start is no restart
    # "b" holds the other leaf: with one node down "a" waits for the repair, marked
    assert (True, True) in seen
