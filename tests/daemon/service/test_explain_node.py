"""``railgang explain NODE``: a node held out as flaky, from what the daemon's inventory recorded
(the CLI backend records held-out nodes drained, with the flaky state machine's line)."""

from __future__ import annotations

from sqlalchemy import Engine

from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.service.explain_node import node_explanation, render_node
from railgang.daemon.service.node_inventory import NodeInventory
from railgang.daemon.slurm.cli.failures import hide
from railgang.daemon.slurm.cli.records import SinfoNode
from railgang.db.session import session_scope
from tests.daemon.service.conftest import engine  # noqa: F401 (SQLite + PostgreSQL)

WHY = "railgang: flaky: 3 job failures in 24 h (last: node_fail of job 12); burn-in running"


def test_a_flaky_node_is_explained_with_its_burn_in(engine: Engine) -> None:  # noqa: F811
    # burning in, the node is idle in Slurm (resumed into its reservation): railgang shows it drained
    sinfo = [SinfoNode("n01", 8, NodeState.IDLE, "", frozenset()),
             SinfoNode("n02", 8, NodeState.IDLE, "", frozenset())]
    shown = hide(sinfo, frozenset({"n02"}), lambda n: WHY if n == "n02" else None)
    with session_scope(engine) as s:
        NodeInventory("rg").record(s, shown, {"n01": "h100", "n02": "h100"}, 1000.0)
    with session_scope(engine) as s:
        e = node_explanation(s, "n02", 1060.0)
        assert node_explanation(s, "n99", 1060.0) is None
        ok = node_explanation(s, "n01", 1060.0)
    assert e is not None and e["flaky"] and e["state"] == "drain" and e["age_s"] == 60.0
    text = render_node(e)
    assert "held out by railgang as flaky: 3 job failures in 24 h" in text
    assert "burn-in running" in text and "only when its burn-in job passes" in text
    assert ok is not None and not ok["flaky"] and "held out" not in render_node(ok)
