"""The fleet's inventory for the nightly report: every node as sinfo shows it, kept in the
ledger's ``node_states`` each cycle (``db/repositories/nodes.py``).

The report sizes each pool from every node it knows, busy or idle, and lists down and drained
intervals; without this only nodes whose GPUs sent telemetry counted. A row is written only for a
node that is new or changed (state, reason, GPU type, GPU count), and the recorder remembers
what it wrote last, so an unchanged fleet costs no query at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy.orm import Session

from railgang.db.repositories.nodes import NodeSeen, record_node_states


class NodeInventory:
    """One cycle's step: the nodes of the backend's last observation into ``node_states``."""

    def __init__(self, cluster: str,
                 on_read: Callable[[Sequence[Any]], None] | None = None) -> None:
        self.cluster = cluster
        self.on_read = on_read  # every read, changed or not (the daemon's railgang_nodes_out)
        self._last: frozenset[NodeSeen] | None = None

    def record(self, s: Session, nodes: Iterable[Any], gpu_types: dict[str, str], now: float) -> int:
        """``nodes``: sinfo's nodes (name, state, gpus, reason); ``gpu_types``: node -> GPU type
        from the snapshot's facts. Returns the rows written (the caller commits)."""
        nodes = list(nodes)
        if self.on_read is not None:
            self.on_read(nodes)
        seen = frozenset(NodeSeen(n.name, _state(n), gpu_types.get(n.name, ""), n.gpus, n.reason)
                         for n in nodes)
        if seen == self._last:
            return 0
        written = record_node_states(s, self.cluster, seen, int(now), whole_fleet=True)
        self._last = seen
        return written


def _state(n: Any) -> str:
    """The recorded state, for the report's sreport-like capacity split (report/sreport.py):
    "+reserved" while in an active reservation; "maint" for a node the core reads as drain
    only because a MAINT reservation holds it (slurmdbd records no node event for that, and
    sreport counts its time as PLND Down, not Down)."""
    state = str(n.state)
    if getattr(n, "maint", False):
        state = "maint" if state == "drain" else f"{state}+maint"
    return state + ("+reserved" if getattr(n, "reserved", False) else "")


__all__ = ["NodeInventory"]
