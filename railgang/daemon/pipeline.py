"""The cycle's pipeline (issue 34 item 1): the steps between what a backend observed and the
actions it carries out, the same in the daemon and in the simulator.

A step is pure: ``run(snapshot, facts, memory, now) -> StepOut(snapshot, actions, memory)``.
``facts`` is what the shells read for the steps, by step name (the failure step's jobs and nodes
as Slurm shows them, ``failures/facts.py``; the serving step's forecasts, ``serving/live.py``);
``memory`` is the step's own state between cycles, handed back changed, never kept inside the
step. Each step sees the snapshot the step before it left (the failure step drains the flaky
nodes out of it, the serving step hides the replicas not yet wanted) and the core decides on
the last one. Once the backend answered, ``settle(memory, results, now)`` lets a step learn what
became of its own actions (the burn-in job's id).

``Pipeline`` holds the steps, their memories (``stores`` keep a memory across restarts:
``failures/persist.py``) and the readers of facts no backend reads (``serving/live.py``); ``Cycle(steps, config, policy)`` is what one cycle runs, built by
``cycle_settings.pipeline_from(settings)`` next to ``cycle_from``. ``loop.run_cycle`` takes the
pipeline as it is: it has no hook of any one feature. This module imports no step: the steps
are built where the settings are read, so a backend that imports the loop imports no decision.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.plan import Policy
from railgang.daemon.core.model.snapshot import Snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StepOut:
    snapshot: Snapshot  # what the next step (and at last the core) sees
    actions: tuple[Action, ...] = ()  # carried out before the core's, in this order
    memory: Any = None  # the step's memory for the next cycle


@runtime_checkable
class Step(Protocol):
    name: str

    def initial(self) -> Any:
        """The memory of a first cycle."""
        ...

    def run(self, snapshot: Snapshot, facts: Mapping[str, Any], memory: Any,
            now: float) -> StepOut:
        """Pure: the same inputs give the same answer."""
        ...

    def settle(self, memory: Any, results: Sequence[ActionResult], now: float) -> Any:
        """The memory once the backend answered this step's actions (one result each)."""
        ...


class MemoryStore(Protocol):
    """Keeps one step's memory across restarts."""

    def load(self, memory: Any, now: float) -> Any: ...

    def save(self, memory: Any, now: float) -> None: ...


@runtime_checkable
class FactsBackend(Protocol):
    """A backend that read facts for the steps while it observed (the Slurm backend)."""

    def facts(self) -> Mapping[str, Any]: ...


class Pipeline:
    """The steps in order and their memories between cycles."""

    def __init__(self, steps: Sequence[Step] = (),
                 stores: Mapping[str, MemoryStore] | None = None,
                 readers: Mapping[str, Callable[[float], Any]] | None = None) -> None:
        self.steps = tuple(steps)
        self.stores = dict(stores or {})
        # facts read outside the backend, by step name (the serving step's forecast files)
        self.readers = dict(readers or {})
        self.memory: dict[str, Any] = {s.name: s.initial() for s in self.steps}
        self._loaded = not self.stores
        self._mine: list[tuple[Step, int]] = []  # each step's share of the last actions

    def held_nodes(self) -> dict[str, str]:
        """The nodes a step holds out of placement, and why (the node inventory records it)."""
        out: dict[str, str] = {}
        for memory in self.memory.values():
            held = getattr(memory, "held", None)
            if callable(held):
                out.update(held())
        return out

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    def run(self, snapshot: Snapshot, facts: Mapping[str, Any],
            now: float) -> tuple[Snapshot, tuple[Action, ...], dict[str, float]]:
        """Every step in order: the snapshot the core decides on, the steps' actions, and each
        step's milliseconds."""
        facts = {**facts, **{name: read(now) for name, read in self.readers.items()}}
        if not self._loaded:
            self._loaded = True
            for name, store in self.stores.items():
                if name in self.memory:
                    self.memory[name] = store.load(self.memory[name], now)
        actions: list[Action] = []
        self._mine = []
        ms: dict[str, float] = {}
        for s in self.steps:
            t = time.perf_counter()
            out = s.run(snapshot, facts, self.memory[s.name], now)
            snapshot, self.memory[s.name] = out.snapshot, out.memory
            actions += out.actions
            self._mine.append((s, len(out.actions)))
            ms[s.name] = (time.perf_counter() - t) * 1e3
        return snapshot, tuple(actions), ms

    def settle(self, results: Sequence[ActionResult], now: float) -> None:
        """Hand each step the results of its own actions (they come first, in step order)."""
        at = 0
        for s, count in self._mine:
            self.memory[s.name] = s.settle(self.memory[s.name], results[at:at + count], now)
            at += count
        self._mine = []
        for name, store in self.stores.items():
            try:
                store.save(self.memory[name], now)
            except OSError as exc:  # kept in memory; written again next cycle
                log.warning("pipeline: memory of step %s not kept: %s", name, exc)


@dataclass(frozen=True)
class Cycle:
    """What one cycle runs: the steps before the core, the core's knobs and the policy."""

    steps: Pipeline
    config: CycleConfig
    policy: Policy


__all__ = ["Cycle", "FactsBackend", "MemoryStore", "Pipeline", "Step", "StepOut"]
