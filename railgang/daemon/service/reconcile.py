"""Reconciliation: decide, from a fresh snapshot, what became of actions left ``planned``.

A pure function (journal entries + snapshot -> verdicts): Slurm is the truth. The daemon wrote
each action ``planned`` and committed before sending it; if it died before writing the outcome,
the entry stays ``planned``. At start and at the top of every cycle the daemon asks Slurm (the
snapshot) whether each such action took effect:

=============  ===============================================  ===================================
action         applied when                                     otherwise
=============  ===============================================  ===================================
Start          the job runs on exactly the planned nodes        abandoned (pending, elsewhere, gone)
Resize         the job runs with the planned replicas/GPUs      abandoned (other size, not running)
Preempt        the job was signalled (deadline set), is back    abandoned (runs, not signalled)
               in the queue, or is gone
Migrate        as Preempt, or it runs again on the target nodes abandoned (runs, not signalled)
DrainNode      the node is drained                              abandoned
TagNode        the node carries (remove: lacks) the tag         abandoned
SetPriority    — (idempotent)                                   resend while the job is pending,
                                                                else abandoned
Requeue        the job waits or is gone                         abandoned (still runs)
SubmitBurnIn,  — (the failure step asks again when the state    abandoned
ReleaseBurnIn, asks for it: failures/step.py)
Resume
=============  ===============================================  ===================================

*Abandoned* is not lost: the action did not happen, and the cycle that follows decides afresh
from the same snapshot (it starts the job again if that is still the best move). *Applied* is not
repeated: the fresh snapshot already shows it, so the core does not ask for it again.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from railgang.daemon.core.model.actions import (
    Action,
    DrainNode,
    Migrate,
    Preempt,
    ReleaseBurnIn,
    Requeue,
    Resize,
    Resume,
    SetPriority,
    Start,
    SubmitBurnIn,
    TagNode,
)
from railgang.daemon.core.model.snapshot import Snapshot


class Verdict(enum.Enum):
    APPLIED = "applied"
    ABANDONED = "abandoned"
    RESEND = "resend"  # idempotent: send it again (SetPriority), then record what Slurm says


@dataclass(frozen=True, slots=True)
class OpenEntry:
    """A journal entry still ``planned``, with its decoded action (None: payload unreadable)."""

    entry_id: int
    action: Action | None
    problem: str = ""  # why ``action`` is None


@dataclass(frozen=True, slots=True)
class Settlement:
    entry_id: int
    verdict: Verdict
    detail: str


def judge(action: Action, snapshot: Snapshot,
          pending_ids: frozenset[str] | None = None) -> tuple[Verdict, str]:
    """The verdict on one planned action (see the module table)."""
    A, X = Verdict.APPLIED, Verdict.ABANDONED
    if isinstance(action, DrainNode | TagNode):
        node = snapshot.nodes.get(action.node)
        if node is None:
            return X, f"node {action.node} is no longer in the cluster"
        if isinstance(action, DrainNode):
            return (A, "node is drained") if node.state == "drain" else (
                X, f"node is {node.state}, not drained")
        if action.remove:
            return (A, "tag is off the node") if action.tag not in node.tags else (
                X, f"node still carries tag {action.tag!r}")
        return (A, "node carries the tag") if action.tag in node.tags else (
            X, f"node does not carry tag {action.tag!r}")
    if isinstance(action, SubmitBurnIn | ReleaseBurnIn | Resume):
        return X, "the failure step decides again from what Slurm shows"
    job_id = action.job_id
    running = snapshot.running.get(job_id)
    if pending_ids is None:
        pending_ids = frozenset(j.job_id for j in snapshot.pending)
    pending = running is None and job_id in pending_ids
    where = "running" if running is not None else "pending" if pending else "gone"
    if isinstance(action, Requeue):
        return (X, "job still runs") if running is not None else (A, f"job is {where}")
    if isinstance(action, SetPriority):
        return (Verdict.RESEND, "still pending: priority sent again") if pending else (
            X, f"job is {where}: priority no longer matters")
    if isinstance(action, Start):
        if running is None:
            return X, f"job is {where}: it was not started; the next cycle decides again"
        if set(running.assignment) == set(action.assignment):
            return A, f"running on the planned {len(action.assignment)} node(s)"
        return X, f"running on other nodes ({', '.join(sorted(running.assignment))})"
    if isinstance(action, Resize):
        if running is None:
            return X, f"job is {where}: nothing to resize"
        if running.replicas == action.replicas or running.gpus == action.gpus:
            return A, f"running with {running.gpus} GPUs as planned"
        return X, f"running with {running.gpus} GPUs, not {action.gpus}"
    if isinstance(action, Migrate) and running is not None and set(running.assignment) == set(
            action.assignment):
        return A, "restarted on the target nodes"
    if isinstance(action, Preempt | Migrate):
        if running is None:
            return A, f"job is {where}: the preemption took effect"
        if running.preempt_deadline is not None:
            return A, "job was signalled and is in its grace time"
        return X, "job still runs and was not signalled; the next cycle decides again"
    return X, f"unknown action {type(action).__name__}"


def reconcile(entries: Sequence[OpenEntry], snapshot: Snapshot) -> list[Settlement]:
    """One settlement per open entry, in the same order."""
    pending_ids = frozenset(j.job_id for j in snapshot.pending)
    out = []
    for e in entries:
        if e.action is None:
            out.append(Settlement(e.entry_id, Verdict.ABANDONED, f"unreadable: {e.problem}"))
            continue
        verdict, detail = judge(e.action, snapshot, pending_ids)
        out.append(Settlement(e.entry_id, verdict, detail))
    return out


__all__ = ["OpenEntry", "Settlement", "Verdict", "judge", "reconcile"]
