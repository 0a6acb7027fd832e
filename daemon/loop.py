"""One scheduling cycle, shared by the daemon and the simulator: observe → decide → act.

``run_cycle`` is the only place that connects a :class:`~railgang.daemon.slurm.backend.Backend`, the pure
decision core and a :class:`~railgang.daemon.clock.Clock`. The daemon calls it on a timer with the Slurm
backend and the wall clock; the simulator calls it on its events with ``SimBackend`` and a
``SimClock``; unit tests call it with ``FakeBackend``. There is no simulation flag anywhere.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from railgang.daemon.clock import Clock
from railgang.daemon.core.actions import Action
from railgang.daemon.core.cycle import CycleConfig, decide
from railgang.daemon.core.gang import Placer, topology_placer
from railgang.daemon.core.policy import Policy
from railgang.daemon.core.reasons import PendingReason
from railgang.daemon.slurm.backend import ActionResult, Backend


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    now: float
    actions: tuple[Action, ...]
    reasons: tuple[PendingReason, ...]
    results: tuple[ActionResult, ...]

    @property
    def failed(self) -> Sequence[ActionResult]:
        return [r for r in self.results if not r.ok]


def run_cycle(backend: Backend, policy: Policy, clock: Clock, rng: random.Random, *,
              config: CycleConfig | None = None, placer: Placer = topology_placer,
              ) -> CycleOutcome:
    """1. read the clock, 2. observe, 3. decide (pure), 4. apply, 5. report.

    ``config`` and ``placer`` are the core's own knobs, passed through unchanged (the default
    placer is the topology engine; tests may inject a first-fit one).
    """
    now = clock.now()
    snapshot = backend.snapshot(now)
    decision = decide(snapshot, policy, now, rng, config=config or CycleConfig(), placer=placer)
    actions = tuple(decision.actions)
    results = tuple(backend.apply(actions, now)) if actions else ()
    return CycleOutcome(now=now, actions=actions, reasons=tuple(decision.reasons), results=results)


__all__ = ["CycleOutcome", "run_cycle"]
