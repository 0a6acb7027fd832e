"""A job a fault requeued is marked ``after_fault`` (first in its class) in a replay, by the
daemon's own failure step (issue 34 item 3), and the mark is cleared once it runs again (issue 20;
docs/failures.md)."""

from __future__ import annotations

import itertools

from railgang.daemon.core.policies import registry
from railgang.daemon.failures.rates import FailureRates
from railgang.daemon.pipeline import Pipeline
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.failures import FailureConfig, daemon_steps
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

HOUR = 3600.0


def test_a_fault_requeue_is_marked_until_the_job_runs_again() -> None:
    # (waiting, after_fault, requeued by a fault this cycle) of job "a" after each cycle
    seen: list[tuple[bool, bool, bool]] = []
    built: list[Pipeline] = []

    def steps() -> Pipeline:
        built.append(daemon_steps())
        return built[-1]

    def watch(now: float, backend: SimBackend) -> None:
        sj = backend.jobs.get("a")
        if sj is not None:  # the failure step's mark, which the core saw this cycle
            last = built[0].memory["failures"].last
            seen.append((sj.assignment is None, "a" in last.after_fault, "a" in last.requeue))

    config = EngineConfig(failures=FailureConfig(rates=FailureRates(0.0, 0.5, 0.0, repair_s=600.0)),
                          steps=steps)
    run = simulate([TraceJob("a", 0.0, 32, 6 * HOUR), TraceJob("b", 1.0, 32, 6 * HOUR)],
                   registry.get("fifo"), fabric_from_shape(8, 8, 4), config=config, observer=watch)
    assert run.records[0].interruptions > 0
    # the mark is the one the core saw this cycle: a job it started then still shows it; a job
    # that ran already at the cycle before and was not killed since never does
    assert not any(mark and not waiting and not before and not killed
                   for (before, _, _), (waiting, mark, killed) in itertools.pairwise(seen))
    assert seen[0] == (False, False, False)  # a first start is no restart
    # "b" holds the other leaf: with one node down "a" waits for the repair, marked
    assert any(waiting and mark for waiting, mark, _ in seen)
