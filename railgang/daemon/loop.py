"""One scheduling cycle, shared by the daemon and the simulator: observe → decide → act.

``run_cycle`` is the only place that connects a :class:`~railgang.daemon.backend.Backend`, the pure
decision core and a :class:`~railgang.daemon.clock.Clock`. The daemon calls it on a timer with the Slurm
backend and the wall clock; the simulator calls it on its events with ``SimBackend`` and a
``SimClock``; unit tests call it with ``FakeBackend``. There is no simulation flag anywhere.

The daemon passes a :class:`CycleJournal` (``railgang.daemon.service``): it reconciles the
journal against the fresh snapshot before the core decides, and writes every action down
(durably) before the backend sends it and again once the backend answered — so a crash between
the two leaves a ``planned`` entry the next cycle can settle from Slurm. Each step is timed;
``CycleOutcome.timings`` holds the backend's and the journal's milliseconds next to the core's
phases.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from railgang.daemon.backend import ActionResult, Backend
from railgang.daemon.clock import Clock
from railgang.daemon.core.cycle import CycleConfig, decide
from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.fairshare import RecentUse, with_recent_use
from railgang.daemon.core.model.gang import Placer, topology_placer
from railgang.daemon.core.model.plan import Policy
from railgang.daemon.core.model.quota import QuotaTree
from railgang.daemon.core.model.reasons import PendingReason
from railgang.daemon.core.model.snapshot import PreemptEvent, Snapshot
from railgang.daemon.pipeline import FactsBackend, Pipeline


class CycleJournal(Protocol):
    """Where the daemon's cycle writes its actions down (the simulator passes none)."""

    def observed(self, snapshot: Snapshot, now: float) -> None:
        """The fresh snapshot, before deciding: settle what an earlier cycle left open."""
        ...

    def planned(self, actions: Sequence[Action], now: float) -> None:
        """Record ``actions`` durably; returns only once they would survive a crash."""
        ...

    def settled(self, results: Sequence[ActionResult], now: float) -> None:
        """Record what the backend answered, one result per planned action."""
        ...


@dataclass(frozen=True, slots=True)
class CycleOutcome:
    now: float
    actions: tuple[Action, ...]
    reasons: Sequence[PendingReason]  # the core's, built when read (``Decision.reasons``)
    results: tuple[ActionResult, ...]
    snapshot: Snapshot | None = field(default=None, repr=False)  # what the core decided on
    # milliseconds: "snapshot", the core's phases, "reconcile", "journal", "apply"
    timings: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}), repr=False)

    @property
    def failed(self) -> Sequence[ActionResult]:
        return [r for r in self.results if not r.ok]


def run_cycle(backend: Backend, policy: Policy, clock: Clock, rng: random.Random, *,
              config: CycleConfig | None = None, placer: Placer = topology_placer,
              journal: CycleJournal | None = None, quotas: QuotaTree | None = None,
              health: Any = None, preemptions: Sequence[PreemptEvent] | None = None,
              recent_use: RecentUse | None = None, steps: Pipeline | None = None,
              ) -> CycleOutcome:
    """1. read the clock, 2. observe (and reconcile), 3. the pipeline's steps and the core
    decide (pure), 4. journal, apply, journal, 5. the steps learn their results, 6. report.

    ``config`` and ``placer`` are the core's own knobs, passed through unchanged (the default
    placer is the topology engine; tests may inject a first-fit one). ``quotas``: the quota tree
    the daemon read from its database, put into the backend's snapshot (None: the snapshot's own);
    ``health`` likewise: the ``LinkHealth`` of the daemon's live link collector; ``preemptions``
    the recent preemptions from the daemon's journal (Slurm shows none), added to the snapshot's
    own (the simulator's: a job it already shows is not counted twice); ``recent_use``: each
    account's decayed use of finished runs from the ledger, made the accounts' fair-share input
    with the running jobs (``core/model/fairshare.py``). ``steps``: the pipeline before the
    core (``pipeline.py``: the failure response, the serving controller), after the reconcile,
    with what the backend read for them (``FactsBackend``): the snapshot the core decides on
    and their actions, sent first. No step is named here: a feature is a step.
    """
    ms: dict[str, float] = {}
    t = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal t
        t1 = time.perf_counter()
        ms[step] = ms.get(step, 0.0) + (t1 - t) * 1e3
        t = t1

    now = clock.now()
    snapshot = backend.snapshot(now)
    if quotas is not None:
        snapshot = snapshot.replace(quotas=quotas)
    if health is not None:  # live link health from the daemon's collector (service/links.py)
        snapshot = snapshot.replace(health=health)
    if preemptions:  # the churn budget's history (service/journal.py)
        shown = {e.job_id for e in snapshot.preemptions}
        extra = tuple(e for e in preemptions if e.job_id not in shown)
        if extra:
            snapshot = snapshot.replace(preemptions=tuple(
                sorted((*snapshot.preemptions, *extra), key=lambda e: (e.time, e.job_id))))
    if recent_use is not None:
        snapshot = with_recent_use(snapshot, recent_use.done, recent_use.half_life_s)
    lap("snapshot")
    if journal is not None:
        journal.observed(snapshot, now)
        lap("reconcile")
    before: Sequence[Action] = ()
    if steps is not None:
        facts = backend.facts() if isinstance(backend, FactsBackend) else {}
        snapshot, before, step_ms = steps.run(snapshot, facts, now)
        ms.update(step_ms)
        t = time.perf_counter()
    decision = decide(snapshot, policy, now, rng, config=config or CycleConfig(), placer=placer)
    ms.update(decision.phase_ms)
    t = time.perf_counter()
    actions = (*before, *decision.actions)
    results: tuple[ActionResult, ...] = ()
    if actions:
        if journal is not None:
            journal.planned(actions, now)
            lap("journal")
        results = tuple(backend.apply(actions, now))
        lap("apply")
        if journal is not None:
            journal.settled(results, now)
            lap("journal")
    if steps is not None:
        steps.settle(results[:len(before)], now)
    return CycleOutcome(now=now, actions=actions, reasons=decision.reasons,
                        results=results, snapshot=snapshot, timings=MappingProxyType(ms))


__all__ = ["CycleJournal", "CycleOutcome", "run_cycle"]
