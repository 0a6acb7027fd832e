"""The failure step and the Slurm backend's hands composed as one cycle composes them (issue 34
item 2: the backend reads the facts, the pipeline's step decides, the backend carries out), for
tests that drive them against a scripted launcher."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.actions import (
    DrainNode,
    ReleaseBurnIn,
    Requeue,
    Resume,
    SubmitBurnIn,
)
from railgang.daemon.core.model.snapshot import make_snapshot
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.persist import MemoryFile
from railgang.daemon.failures.respond import Response
from railgang.daemon.failures.step import FailureMemory, FailureStep
from railgang.daemon.pipeline import Pipeline
from railgang.daemon.slurm.cli.apply import ApplyConfig, apply_actions
from railgang.daemon.slurm.cli.failures import FailureHands
from railgang.daemon.slurm.cli.records import SinfoNode, SqueueJob
from railgang.daemon.slurm.cli.runner import SlurmRunner


@dataclass(frozen=True)
class Done:
    """One carried-out action, named as the log names it."""

    subject: str  # the job or the node
    step: str  # requeue | drain | burn_in | release | resume
    ok: bool
    detail: str

    @property
    def job_id(self) -> str:  # the old FollowUp's name for the subject
        return self.subject


def done_of(r: ActionResult) -> Done:
    a = r.action
    step = {Requeue: "requeue", DrainNode: "drain", SubmitBurnIn: "burn_in",
            ReleaseBurnIn: "release", Resume: "resume"}[type(a)]
    return Done(str(getattr(a, "job_id", "") or getattr(a, "node", "")), step, r.ok, r.detail)


class Responder:
    def __init__(self, runner: SlurmRunner, settings: FailureSettings, user: str = "railgang",
                 slurm_user: str | None = None, memory_file: Path | None = None) -> None:
        self.runner = runner
        self.hands = FailureHands(runner, settings, user=user, slurm_user=slurm_user)
        stores: dict[str, Any] = ({"failures": MemoryFile(memory_file, settings.rules())}
                                  if memory_file is not None else {})
        self.pipeline = Pipeline([FailureStep(settings)], stores)

    @property
    def memory(self) -> FailureMemory:
        m = self.pipeline.memory["failures"]
        assert isinstance(m, FailureMemory)
        return m

    def step(self, seen: Sequence[SqueueJob], nodes: Sequence[SinfoNode],
             now: float) -> tuple[Response, list[Done]]:
        facts = {"failures": self.hands.read(seen, nodes)}
        snap = make_snapshot(now=now, fabric=None, nodes=[])
        _, actions, _ = self.pipeline.run(snap, facts, now)
        results = apply_actions(self.runner, None, actions, now, ApplyConfig(),  # type: ignore[arg-type]
                                hands=self.hands.apply) if actions else []
        self.pipeline.settle(results, now)
        return self.memory.last, [done_of(r) for r in results]

    def held_out(self) -> frozenset[str]:
        return frozenset(self.memory.last.held_out)

    def why(self, node: str) -> str | None:
        return self.memory.why(node)


class BackendCycle:
    """A Slurm backend and the failure step: one cycle up to the core (what ``run_cycle`` does
    before the core decides: observe, the step, the step's actions carried out, settle)."""

    def __init__(self, backend: Any, settings: FailureSettings) -> None:
        self.backend = backend
        self.pipeline = Pipeline([FailureStep(settings)])

    def snapshot(self, now: float) -> Any:
        """The snapshot the core would decide on."""
        snap = self.backend.snapshot(now)
        snap, actions, _ = self.pipeline.run(snap, self.backend.facts(), now)
        results = self.backend.apply(actions, now) if actions else []
        self.pipeline.settle(results, now)
        return snap

    @property
    def failures(self) -> BackendCycle:  # the step's side: its last response, what it holds out
        return self

    @property
    def last(self) -> Response:
        m = self.pipeline.memory["failures"]
        assert isinstance(m, FailureMemory)
        return m.last

    def held_out(self) -> frozenset[str]:
        return frozenset(self.last.held_out)
