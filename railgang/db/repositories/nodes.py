"""The fleet's inventory (``node_states``): what ``sinfo`` showed, one row per change.

The report sizes its pools from every node here, busy or idle, and lists the down and drained
intervals (``daemon/report/inventory.py``). A collector calls :func:`record_node_states` with
each snapshot of the nodes; a row is added only for a node that is new or whose state, reason,
GPU type or GPU count changed since its last row, so a snapshot every cycle costs one read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from railgang.db.ledger import NodeState


@dataclass(frozen=True, slots=True)
class NodeSeen:
    node: str
    state: str  # sinfo's state, e.g. idle, mixed, allocated, drain, down
    gpu_type: str
    gpus: int
    reason: str = ""


GONE = "gone"  # the state of a node that left sinfo: the report counts a node while it exists


def record_node_states(s: Session, cluster: str, nodes: Iterable[NodeSeen], at_epoch: int,
                       *, whole_fleet: bool = False) -> int:
    """Add a row for each node that is new or changed; returns how many were added. With
    ``whole_fleet`` (the daemon's sinfo read lists every node) a known node missing from
    ``nodes`` gets a ``gone`` row. Does not commit (the caller owns the transaction)."""
    last_at = (select(NodeState.node, func.max(NodeState.at_epoch).label("at"))
               .where(NodeState.cluster == cluster).group_by(NodeState.node).subquery())
    q = (select(NodeState.node, NodeState.state, NodeState.gpu_type, NodeState.gpus,
                NodeState.reason)
         .join(last_at, (NodeState.node == last_at.c.node) & (NodeState.at_epoch == last_at.c.at))
         .where(NodeState.cluster == cluster))
    known = {r[0]: tuple(r[1:]) for r in s.execute(q)}
    nodes = list(nodes)
    rows = [{"cluster": cluster, "node": n.node, "at_epoch": at_epoch, "state": n.state[:24],
             "gpu_type": n.gpu_type[:32], "gpus": n.gpus, "reason": n.reason[:256]}
            for n in nodes
            if known.get(n.node) != (n.state[:24], n.gpu_type[:32], n.gpus, n.reason[:256])]
    if whole_fleet:
        present = {n.node for n in nodes}
        rows += [{"cluster": cluster, "node": name, "at_epoch": at_epoch, "state": GONE,
                  "gpu_type": last[1], "gpus": last[2], "reason": ""}
                 for name, last in sorted(known.items())
                 if name not in present and last[0] != GONE]
    if rows:
        s.execute(insert(NodeState), rows)
    return len(rows)


def last_state(s: Session, node: str) -> NodeState | None:
    """The node's latest row (any cluster), or None: what ``railgang explain NODE`` shows."""
    q = select(NodeState).where(NodeState.node == node).order_by(NodeState.at_epoch.desc()).limit(1)
    return s.execute(q).scalars().first()


__all__ = ["GONE", "NodeSeen", "last_state", "record_node_states"]
