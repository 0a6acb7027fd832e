"""The daemon's cycle keeps the fleet's inventory (node_states) for the report: every node sinfo
lists, a row only when a node is new or changed, and no query while nothing changed."""

from __future__ import annotations

from sqlalchemy import Engine, event, func, select

from railgang.daemon.service.node_inventory import NodeInventory
from railgang.daemon.slurm.cli.records import SinfoNode
from railgang.db.ledger import NodeState
from railgang.db.session import session_scope
from tests.daemon.service.conftest import engine  # noqa: F401 (SQLite + PostgreSQL)


def _nodes(drained: str | None = None) -> list[SinfoNode]:
    return [SinfoNode(f"n{i:02d}", 8, "drain" if f"n{i:02d}" == drained else "idle",
                      "railgang: burn-in" if f"n{i:02d}" == drained else "", frozenset())
            for i in range(1, 5)]


def test_rows_only_for_new_or_changed_nodes_and_no_query_when_unchanged(engine: Engine) -> None:  # noqa: F811
    inv = NodeInventory("rg")
    types = {f"n{i:02d}": "a100" for i in range(1, 5)}
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    with session_scope(engine) as s:
        assert inv.record(s, _nodes(), types, 1000.0) == 4
    statements.clear()
    with session_scope(engine) as s:
        assert inv.record(s, _nodes(), types, 1010.0) == 0
    assert not [q for q in statements if "node_states" in q]  # an unchanged fleet costs nothing
    with session_scope(engine) as s:
        assert inv.record(s, _nodes(drained="n03"), types, 1020.0) == 1
    with session_scope(engine) as s:
        rows = s.execute(select(NodeState.node, NodeState.state, NodeState.reason)
                         .where(NodeState.at_epoch == 1020)).all()
        assert [tuple(r) for r in rows] == [("n03", "drain", "railgang: burn-in")]
        assert s.scalar(select(func.count()).select_from(NodeState)) == 5
