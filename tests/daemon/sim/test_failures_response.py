"""A replay with failures runs the daemon's failure step (issue 34 item 3): a node that keeps
failing is drained as flaky, burned in once no job is left on it, and released when the burn-in
passes; the actions are the step's, carried out by ``SimBackend`` (``sim/node_ops.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.actions import (
    Action,
    DrainNode,
    ReleaseBurnIn,
    Requeue,
    SubmitBurnIn,
)
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies import registry
from railgang.daemon.failures.rates import FailureRates
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.failures import FailureConfig
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

HOUR = 3600.0


class Journal:
    """The actions of every cycle and their results, as the daemon's journal sees them."""

    def __init__(self) -> None:
        self.actions: list[tuple[float, Action]] = []
        self.failed: list[ActionResult] = []

    def observed(self, snapshot: Snapshot, now: float) -> None:
        pass

    def planned(self, actions: Sequence[Action], now: float) -> None:
        self.actions += [(now, a) for a in actions]

    def settled(self, results: Sequence[ActionResult], now: float) -> None:
        self.failed += [r for r in results if not r.ok]


def test_a_flaky_node_is_drained_burned_in_and_released_by_the_daemons_step() -> None:
    journal = Journal()
    config = EngineConfig(failures=FailureConfig(
        rates=FailureRates(0.0, 2.0, 0.0, repair_s=600.0), seed=3))
    jobs = [TraceJob(f"j{i}", i * 60.0, 16, 4 * HOUR) for i in range(6)]
    run = simulate(jobs, registry.get("fifo"), fabric_from_shape(4, 8, 4), config=config,
                   journal=journal)
    kinds = [type(a) for _, a in journal.actions]
    assert Requeue in kinds  # every kill the step saw: the job, already waiting again
    drains = [(t, a.node) for t, a in journal.actions if isinstance(a, DrainNode)]
    assert drains and all(a.reason.startswith("railgang: flaky") for _, a in journal.actions
                          if isinstance(a, DrainNode))
    t0, node = drains[0]
    burn = [t for t, a in journal.actions if isinstance(a, SubmitBurnIn) and a.node == node]
    back = [t for t, a in journal.actions if isinstance(a, ReleaseBurnIn) and a.node == node
            and not a.quiet]
    assert burn and back and t0 <= burn[0] < back[0]
    assert back[0] - burn[0] >= 600.0  # FailureConfig.burn_in_s: the burn-in ran
    assert not journal.failed, journal.failed
    assert not run.unfinished_reasons  # the drained nodes came back: every job ran
