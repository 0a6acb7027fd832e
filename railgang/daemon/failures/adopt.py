"""A restarted daemon takes over the flaky nodes its predecessor left (issue 20), decided as a pure
function over what Slurm shows.

The failure memory lives in the daemon process (``respond.Memory``); Slurm keeps what that memory
*did*: a node drained with a ``railgang: flaky`` reason, a burn-in job named
``railgang-burnin-NODE``, a maintenance reservation ``railgang_burnin_NODE``. Without a takeover a
restart strands them: a node idle inside a reservation only the daemon's user may use, forever (a
stopped daemon's burn-in passed, nobody deleted the reservation), or a burn-in nobody waits for.
On its first cycle the daemon reads the reservations once and :func:`adopt` answers:

- a burn-in job still queued or running → the node is burning in, that job is awaited;
- a node drained with a ``railgang: flaky`` reason → drained, waiting for a burn-in (which the
  next cycles submit as usual);
- a burn-in reservation with neither: its burn-in ended while no daemon watched. Passed (Slurm
  still shows the job COMPLETED) → the reservation is deleted, the node is back; failed, or
  the job is gone from squeue → drained again and burnt in again (nobody saw it pass); a node
  someone else drained meanwhile keeps their reason: railgang gives back the reservation and
  its burn-in waits until they resume the node (``respond.py`` rule 5).

Only reservations railgang made count: a reservation of that name with other users or flags is
someone else's (issue 38 row 5), which the adapter leaves out of ``reserved``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from railgang.daemon.failures.flaky import REASON_PREFIX, NodeStatus, Step, StepKind
from railgang.daemon.failures.flaky import adopt as adopt_node
from railgang.daemon.failures.respond import (
    BurnIn,
    JobView,
    Memory,
    NodeView,
    Setters,
    drained_by_other,
)

__all__ = ["adopt"]

# Slurm job states of a burn-in that has not ended
_ON = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING",
                 "SUSPENDED"})


def adopt(memory: Memory, jobs: Iterable[JobView], nodes: Mapping[str, NodeView],
          reserved: Iterable[str], now: float,
          setters: Setters = Setters()) -> tuple[Memory, list[Step]]:
    """``reserved``: the nodes with a burn-in reservation railgang made (the adapter tells them
    from others' of the same name, ``slurm/cli/failures.burn_in_reservations``). Returns the memory with
    the adopted nodes and the steps that settle the rest (RELEASE a passed node's reservation,
    DRAIN a node whose burn-in nobody saw pass)."""
    live: dict[str, JobView] = {}
    ended: dict[str, JobView] = {}
    for j in jobs:
        if not j.burn_in_of:
            continue
        into = live if j.state in _ON else ended
        prev = into.get(j.burn_in_of)
        if prev is None or j.started_at >= prev.started_at:
            into[j.burn_in_of] = j
    flaky, burn_ins = memory.flaky, dict(memory.burn_ins)
    steps: list[Step] = []
    for node, job in sorted(live.items()):
        if node in burn_ins or flaky.status(node) is not NodeStatus.OK:
            continue
        v = nodes.get(node)
        reason = (v.reason if v is not None and v.reason.startswith(REASON_PREFIX)
                  else f"{REASON_PREFIX}: burn-in job {job.job_id} found at a daemon restart")
        flaky = adopt_node(flaky, node, NodeStatus.BURN_IN, reason, now)
        burn_ins[node] = BurnIn(job.job_id, now)
    for node, v in sorted(nodes.items()):
        if v.state in ("drain", "down") and v.reason.startswith(REASON_PREFIX):
            flaky = adopt_node(flaky, node, NodeStatus.DRAINED, v.reason, now)
    for node in sorted(set(reserved)):
        if flaky.status(node) is not NodeStatus.OK:
            continue  # its burn-in runs, or is still to come: the usual steps follow
        done = ended.get(node)
        if done is not None and done.state == "COMPLETED":
            steps.append(Step(StepKind.RELEASE, node, f"burn-in job {done.job_id} passed"))
            continue
        how = f"job {done.job_id} {done.state.lower()}" if done is not None else "job gone"
        reason = f"{REASON_PREFIX}: burn-in unfinished at a daemon restart ({how})"[:200]
        flaky = adopt_node(flaky, node, NodeStatus.DRAINED, reason, now)
        v = nodes.get(node)
        if v is not None and drained_by_other(v, setters):
            steps.append(Step(StepKind.RELEASE, node, f"burn-in unfinished at a daemon restart "
                              f"({how}); drained by someone else ({v.reason[:80]}): left to them"))
        else:
            steps.append(Step(StepKind.DRAIN, node, reason))
    return replace(memory, flaky=flaky, burn_ins=MappingProxyType(burn_ins)), steps
