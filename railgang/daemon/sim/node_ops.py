"""What ``SimBackend`` does with the actions about nodes and the failure step's hands (issue 34
item 2: every action type is applied by both backends; a test enumerates them).

- ``DrainNode``: the node takes nothing new (its free GPUs leave every later snapshot);
  ``TagNode``: a tag on (or off) the node.
- ``SubmitBurnIn``: the node is reserved for its burn-in (it stays out of placement); the
  burn-in job's id comes back in the detail (``BURN_IN_DETAIL``), as Slurm's sbatch prints it.
- ``ReleaseBurnIn``: the reservation given back: a node resumed into it serves again, a node
  drained meanwhile stays drained.
- ``Resume``: the node serves again, unless it is reserved for a burn-in (only that runs there).
- ``Requeue``: a running job back in the queue now (``SimBackend.requeue``); one a fault's kill
  already put back waits as it is (``sim/failures.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, MutableMapping
from typing import Any, Protocol

from railgang.daemon.core.model.actions import (
    BURN_IN_DETAIL,
    Action,
    DrainNode,
    ReleaseBurnIn,
    Requeue,
    Resume,
    SubmitBurnIn,
    TagNode,
)
from railgang.daemon.core.model.snapshot import Node, NodeState


class NodeHands(Protocol):
    """What of ``SimBackend`` the node actions touch (the backend applies them: no import back)."""

    @property
    def jobs(self) -> Mapping[str, Any]: ...

    @property
    def running(self) -> Mapping[str, Any]: ...

    @property
    def nodes(self) -> MutableMapping[str, Node]: ...

    @property
    def burn_ins(self) -> MutableMapping[str, str]: ...

    @property
    def burn_in_log(self) -> list[tuple[float, str, str]]: ...

    def requeue(self, job_id: str, now: float) -> str | None: ...

    def _nodes_changed(self) -> None: ...

NODE_ACTIONS = (DrainNode, TagNode, SubmitBurnIn, ReleaseBurnIn, Resume, Requeue)  # all it applies


def apply_node_op(backend: NodeHands, action: Action, now: float) -> tuple[bool, str]:
    """(applied, detail) for one node action or ``Requeue``."""
    if isinstance(action, Requeue):
        sj = backend.jobs.get(action.job_id)
        if sj is not None and sj.assignment is None and action.job_id not in backend.running:
            # a fault's kill already put it back (the replay's failures.py: Slurm's requeue)
            return True, "already waiting"
        problem = backend.requeue(action.job_id, now)
        return problem is None, problem or ""
    node_name = str(getattr(action, "node", ""))
    node = backend.nodes.get(node_name)
    if node is None:
        return False, f"unknown node {node_name}"
    reserved = backend.burn_ins
    state = node.state
    detail = ""
    if isinstance(action, TagNode):
        backend.nodes[node_name] = (dataclasses.replace(node, tags=node.tags - {action.tag})
                                    if action.remove else node.with_tag(action.tag))
    elif isinstance(action, DrainNode):
        reserved.pop(node_name, None)  # drained again: the drain wins over a burn-in's resume
        state = NodeState.DRAIN
    elif isinstance(action, SubmitBurnIn):
        job_id = f"burnin-{node_name}-{len(backend.burn_in_log) + 1}"
        backend.burn_in_log.append((now, node_name, job_id))
        reserved[node_name] = job_id
        state, detail = NodeState.DRAIN, BURN_IN_DETAIL.format(job_id=job_id)
    elif isinstance(action, ReleaseBurnIn):
        if reserved.pop(node_name, None) is not None:  # it was resumed into the reservation
            state = NodeState.IDLE
    elif isinstance(action, Resume):
        if node_name not in reserved:
            state = NodeState.IDLE
    else:
        return False, f"unsupported action {type(action).__name__}"
    if state is not node.state:
        backend.nodes[node_name] = backend.nodes[node_name].with_state(state)
    backend._nodes_changed()
    return True, detail


__all__ = ["NODE_ACTIONS", "apply_node_op"]
