"""``record_node_states``: a row per new or changed node, none for a repeated snapshot; the
report then sizes the pool from them and lists the drained interval."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Engine, func, select

from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.service import make_report, parse_day
from railgang.db.ledger import NodeState
from railgang.db.repositories.nodes import NodeSeen, record_node_states
from railgang.db.session import session_scope
from tests.daemon.api.conftest import db_kind, engine  # noqa: F401 (fixtures: SQLite + PostgreSQL)
from tests.daemon.report.ledger_builder import DAY, T0, Ledger

D3 = T0 + 3 * DAY


def test_one_row_per_change(engine: Engine) -> None:  # noqa: F811
    fleet = [NodeSeen(f"n{i}", "idle", "h100", 8) for i in range(4)]
    with session_scope(engine) as s:
        assert record_node_states(s, "c", fleet, T0) == 4
        assert record_node_states(s, "c", fleet, T0 + 60) == 0  # nothing changed
        drained = [*fleet[:3], NodeSeen("n3", "drain", "h100", 8, "xid 79")]
        assert record_node_states(s, "c", drained, D3 + 3600) == 1
        assert record_node_states(s, "c", fleet, D3 + 7200) == 1  # back
        assert s.scalar(select(func.count()).select_from(NodeState)) == 6
    Ledger(engine).team("a", 8).job("j", "a", gpus=8, submit=D3,
                                    segments=[(D3, D3 + 3600, 8, "n0")])
    with session_scope(engine) as s:
        rep = make_report(s, parse_day("2026-11-26"), ReportSettings(),
                          now=datetime(2026, 12, 1, tzinfo=UTC))
    assert rep.pools[0].gpus == 32 and rep.pools[0].capacity_source == "inventory"
    [down] = rep.nodes_down
    assert (down.node, down.reason, down.lost_gpu_h) == ("n3", "xid 79", 8)
