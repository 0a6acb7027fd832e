"""``railgang explain NODE``: why a node is out of service, from the node inventory the daemon
keeps (``node_states``: sinfo's state and reason, one row per change; ``service/node_inventory.py``).

A node railgang holds out as flaky (docs/failures.md) is recorded drained with the flaky state
machine's own line (``FlakyState.why``): why it was drained and where its burn-in stands, e.g.
``railgang: flaky: 3 job failures in 24 h (last: node_fail of job 1234); burn-in running``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from railgang.daemon.when import ago
from railgang.db.repositories.nodes import last_state

FLAKY = "railgang: flaky"


def node_explanation(s: Session, node: str, now: float) -> dict[str, Any] | None:
    """The node's last recorded state, or None when the inventory never saw such a node."""
    row = last_state(s, node)
    if row is None:
        return None
    return {"node": row.node, "cluster": row.cluster, "state": row.state, "reason": row.reason,
            "flaky": row.reason.startswith(FLAKY), "gpus": row.gpus, "gpu_type": row.gpu_type,
            "since": row.at_epoch, "age_s": round(now - row.at_epoch, 1)}


def render_node(e: dict[str, Any]) -> str:
    # how long ago, as everywhere (when.ago); the minute it began, for matching with logs
    since = datetime.fromtimestamp(e["since"], UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = (f"node {e['node']} ({e['gpus']} x {e['gpu_type'] or 'GPU'}): {e['state']} since "
            f"{since}, {ago(e['age_s'])}")
    lines = [head]
    if e["flaky"]:
        lines.append(f"  held out by railgang as flaky: {e['reason'].removeprefix(FLAKY + ': ')}")
        lines.append("  it returns to service only when its burn-in job passes (docs/failures.md)")
    elif e["reason"]:
        lines.append(f"  reason: {e['reason']}")
    return "\n".join(lines)


__all__ = ["node_explanation", "render_node"]
