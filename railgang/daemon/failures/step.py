"""The failure response as a step of the cycle's pipeline (issue 34 items 1-2; ``pipeline.py``).

Pure: what Slurm shows (:class:`~railgang.daemon.failures.facts.FailureFacts`, read by the
backend while it observed) and the memory of the last cycle in; out the snapshot the core must
see, the actions a backend carries out, the new memory. The rules are ``respond.py``'s and
``adopt.py``'s (docs/failures.md); this module turns their answer into actions:

- a job to requeue (ended ``NODE_FAIL`` and left by Slurm, or hung): :class:`Requeue`;
- a flaky node: :class:`DrainNode`, and :class:`ReleaseBurnIn` (quiet) for the reservation of a
  burn-in that failed;
- its burn-in, once no job is left on it: :class:`SubmitBurnIn` (the backend makes the
  reservation, submits the job into it and resumes the node into it); the job's id comes back
  in the result (``settle``); a refused one is a failed burn-in, tried again after ``retry_s``;
- a burn-in that passed: :class:`ReleaseBurnIn` (the node serves again);
- a burn-in waiting on a node still drained or down (the resume that should have let it run was
  refused): :class:`Resume`, every cycle until Slurm takes it.

The snapshot it hands on shows the held-out nodes (drained as flaky, or burning in) drained,
with their GPUs not free, and the jobs a failure requeued ``after_fault`` (first in their class).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.actions import (
    Action,
    DrainNode,
    ReleaseBurnIn,
    Requeue,
    Resume,
    SubmitBurnIn,
)
from railgang.daemon.core.model.snapshot import NodeState, Snapshot
from railgang.daemon.failures.adopt import adopt
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.facts import FailureFacts
from railgang.daemon.failures.flaky import Step, StepKind
from railgang.daemon.failures.respond import (
    Memory,
    Response,
    burn_in_refused,
    burn_in_submitted,
    drained_by_other,
    respond,
)
from railgang.daemon.pipeline import StepOut

log = logging.getLogger(__name__)
NAME = "failures"
_BURN_IN_JOB = re.compile(r"^burn-in job (\S+)")


@dataclass(frozen=True)
class FailureMemory:
    """The step's memory: the responder's, whether the takeover ran (``adopt.py``), the last
    response (for the log and ``railgang explain``)."""

    memory: Memory = field(default_factory=Memory)
    adopted: bool = False
    last: Response = field(default_factory=Response)

    def why(self, node: str) -> str | None:
        return self.memory.flaky.why(node)

    def held(self) -> Mapping[str, str]:
        """The nodes held out and why (the node inventory records it: ``explain NODE``)."""
        return MappingProxyType({n: self.why(n) or "railgang: flaky" for n in self.last.held_out})


def hands(step: Step) -> list[Action]:
    """The actions one responder step takes."""
    if step.kind is StepKind.DRAIN:
        return [DrainNode(step.node, step.reason),
                ReleaseBurnIn(step.node, "drained again", quiet=True)]
    if step.kind is StepKind.BURN_IN:
        return [SubmitBurnIn(step.node, step.reason)]
    if step.kind is StepKind.RELEASE:
        return [ReleaseBurnIn(step.node, step.reason)]
    return [ReleaseBurnIn(step.node, "burn-in passed, back in service")]


class FailureStep:
    """``[failures]``'s step (its settings: rules, hangs)."""

    name = NAME

    def __init__(self, settings: FailureSettings) -> None:
        self.rules, self.hangs = settings.rules(), settings.hangs()

    def initial(self) -> FailureMemory:
        return FailureMemory()

    def run(self, snapshot: Snapshot, facts: Mapping[str, Any], memory: FailureMemory,
            now: float) -> StepOut:
        f = facts.get(NAME)
        if not isinstance(f, FailureFacts):  # this backend reads none: nothing to answer
            return StepOut(snapshot, (), memory)
        mem, adopted = memory.memory, memory.adopted
        actions: list[Action] = []
        if not adopted and f.reserved is not None:
            adopted = True
            mem, settle = adopt(mem, f.jobs, f.nodes, f.reserved, now, f.setters)
            actions += [a for s in settle for a in hands(s)]
        states = {j.job_id: j.state for j in f.jobs}
        burn_in_states = {b.job_id: states[b.job_id] for b in mem.burn_ins.values()
                          if b.job_id in states}
        mem, resp = respond(mem, f.jobs, f.nodes, burn_in_states, now, self.rules, self.hangs,
                            f.setters)
        for fault in resp.faults:
            log.warning("failure: %s", fault.render())
        why = {x.job_id: x.detail for x in resp.faults if x.job_id}
        actions += [Requeue(j, why.get(j, "ended NODE_FAIL")) for j in resp.requeue]
        for s in resp.steps:
            actions += hands(s)
        burning = {s.node for s in resp.steps if s.kind is StepKind.BURN_IN}
        actions += [Resume(n, "resumed into its burn-in reservation")
                    for n, v in f.nodes.items()
                    if n in mem.burn_ins and n not in burning and v.state in ("drain", "down")
                    and not drained_by_other(v, f.setters)]
        out = FailureMemory(mem, adopted, resp)
        return StepOut(_seen(snapshot, out, resp.after_fault), tuple(actions), out)

    def settle(self, memory: FailureMemory, results: Sequence[ActionResult],
               now: float) -> FailureMemory:
        mem = memory.memory
        for r in results:
            if not isinstance(r.action, SubmitBurnIn):
                continue
            found = _BURN_IN_JOB.match(r.detail) if r.ok else None
            if found is not None:
                mem = burn_in_submitted(mem, r.action.node, found.group(1), now)
            else:  # refused: a failed burn-in, tried again after retry_s
                mem = burn_in_refused(mem, r.action.node, now, self.rules)
        return dataclasses.replace(memory, memory=mem)


def _seen(snap: Snapshot, memory: FailureMemory, after_fault: frozenset[str]) -> Snapshot:
    """The snapshot as the core must see it: held-out nodes drained, their GPUs not free (it
    never places a job where Slurm would not run it), requeued jobs first in their class."""
    changes: dict[str, Any] = {}
    held = [n for n in memory.last.held_out if n in snap.nodes]
    if held:
        nodes = dict(snap.nodes)
        for n in held:
            nodes[n] = nodes[n].with_state(NodeState.DRAIN)
        changes.update(nodes=nodes, free={n: g for n, g in snap.free.items() if n not in held},
                       index=None)
    if after_fault and any(j.job_id in after_fault for j in snap.pending):
        changes["pending"] = tuple(
            j.with_state(dataclasses.replace(j.state, after_fault=True))
            if j.job_id in after_fault and not j.state.after_fault else j for j in snap.pending)
    return snap.replace(**changes) if changes else snap


__all__ = ["NAME", "FailureMemory", "FailureStep", "hands"]
