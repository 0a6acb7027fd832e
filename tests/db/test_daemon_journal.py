"""Migration 0002 and the daemon's repositories round-trip on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Engine, inspect, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from railgang.db import migrate
from railgang.db.base import Base
from railgang.db.models import DaemonCycle, JobExplanation, JournalEntry
from railgang.db.repositories import explanations as ex
from railgang.db.repositories import journal as repo
from railgang.db.session import make_engine

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAEMON_TABLES = {"action_journal", "daemon_cycles", "job_explanations", "daemon_leader"}


def _drop_all(engine: Engine) -> None:
    with engine.begin() as conn:  # leave the shared server clean for other tests
        for table in (*Base.metadata.tables, "alembic_version"):  # every table of head
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table} CASCADE")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'j.sqlite'}"
    else:
        url = request.getfixturevalue("postgres_url")
        pg = make_engine(url)
        _drop_all(pg)
        pg.dispose()
    assert migrate.upgrade(url) == migrate.head()
    eng = make_engine(url)
    yield eng
    if request.param == "postgres":
        _drop_all(eng)
    eng.dispose()


def _session(engine: Engine) -> Session:
    return sessionmaker(engine, expire_on_commit=False)()


def test_tables_exist_and_downgrade_removes_them(engine: Engine) -> None:
    assert set(inspect(engine).get_table_names()) >= DAEMON_TABLES
    url = engine.url.render_as_string(hide_password=False)
    command.downgrade(migrate.alembic_config(url), "0001")
    assert migrate.current(url) == "0001"
    assert not DAEMON_TABLES & set(inspect(engine).get_table_names())
    assert migrate.upgrade(url) == migrate.head()


def test_planned_then_settled_round_trip(engine: Engine) -> None:
    rows = [repo.PlannedRow("start", '{"job_id":"7","replicas":1}', job_id="7"),
            repo.PlannedRow("drain_node", '{"node":"n01","reason":"x"}', node="n01")]
    with _session(engine) as s:
        cycle = repo.begin_cycle(s, started_at=T0, leader="h:1", policy="fifo")
        entries = repo.add_planned(s, cycle.id, rows, T0)
        s.commit()
        cid = cycle.id
    with _session(engine) as s:  # a new session sees them committed, planned and open
        open_ = repo.open_entries(s)
        assert [(e.kind, e.job_id, e.node, e.seq, e.state) for e in open_] == [
            ("start", "7", None, 0, "planned"), ("drain_node", None, "n01", 1, "planned")]
        assert open_[0].idem_key == repo.idempotency_key(cid, "start", rows[0].payload)
        assert open_[0].planned_at == T0 and open_[0].planned_at.tzinfo is not None
        repo.settle(s, open_, [("applied", ""), ("failed", "node unknown")], T0)
        s.commit()
    with _session(engine) as s:
        assert repo.open_entries(s) == []
        assert repo.counts_by_state(s) == {"planned": 0, "applied": 1, "failed": 1,
                                           "abandoned": 0}
        assert [e.detail for e in repo.entries_of_cycle(s, cid)] == ["", "node unknown"]
    assert len(entries) == 2


def test_the_same_action_cannot_be_journaled_twice_in_one_cycle(engine: Engine) -> None:
    row = repo.PlannedRow("set_priority", '{"job_id":"7","priority":3}', job_id="7")
    with _session(engine) as s:
        cycle = repo.begin_cycle(s, started_at=T0, leader="h:1", policy="fifo")
        repo.add_planned(s, cycle.id, [row], T0)
        s.commit()
        with pytest.raises(IntegrityError):
            repo.add_planned(s, cycle.id, [row], T0)
        s.rollback()
        other = repo.begin_cycle(s, started_at=T0, leader="h:1", policy="fifo")
        repo.add_planned(s, other.id, [row], T0)  # the next cycle may send it again
        s.commit()
        assert repo.counts_by_state(s)["planned"] == 2


def test_settle_refuses_planned_and_mismatched_lengths(engine: Engine) -> None:
    with _session(engine) as s:
        cycle = repo.begin_cycle(s, started_at=T0, leader="h:1", policy="fifo")
        (e,) = repo.add_planned(s, cycle.id, [repo.PlannedRow("tag_node", "{}", node="n")], T0)
        with pytest.raises(ValueError, match="as 'planned'"):
            repo.settle(s, [e], [("planned", "")], T0)
        with pytest.raises(ValueError, match="1 journal entries but 0 outcomes"):
            repo.settle(s, [e], [], T0)


def test_cycles_leader_and_pruning(engine: Engine) -> None:
    with _session(engine) as s:
        for i in range(5):
            c = repo.begin_cycle(s, started_at=T0 + timedelta(seconds=i), leader="h:1",
                                 policy="fifo")
            repo.finish_cycle(s, c, finished_at=T0 + timedelta(seconds=i, milliseconds=5),
                              pending=i, running=0, actions=0, failed=0,
                              timings={"total": 5.0004})
            (e,) = repo.add_planned(s, c.id, [repo.PlannedRow("start", f'{{"i":{i}}}')], T0)
            if i < 4:
                repo.settle(s, [e], [("applied", "")], T0 + timedelta(seconds=i))
        repo.begin_cycle(s, started_at=T0 + timedelta(seconds=9), leader="h:1", policy="fifo")
        repo.set_leader(s, host="h", pid=1, acquired_at=T0, backend="sim", policy="fifo")
        repo.set_leader(s, host="h2", pid=2, acquired_at=T0, backend="cli", policy="default")
        s.commit()
        last = repo.last_cycle(s)
        assert last is not None and last.pending == 4
        assert json.loads(last.timings) == {"total": 5.0}
        leader = repo.get_leader(s)
        assert leader is not None and (leader.host, leader.pid, leader.backend) == ("h2", 2, "cli")
        repo.prune(s, settled_before=T0 + timedelta(seconds=2), keep_cycles=3)
        s.commit()
        assert len(s.scalars(select(DaemonCycle)).all()) == 3
        states = sorted(e.state for e in s.scalars(select(JournalEntry)))
        assert states == ["applied", "applied", "planned"]  # planned entries are never pruned


def test_explanations_upsert_mark_gone_and_drop(engine: Engine) -> None:
    w = ex.ExplanationRow("7", "waiting", "team-a", 3, 16, reason="fragmented",
                          detail="no slot", position=2, queue_length=5, data='{"ahead":1}')
    r = ex.ExplanationRow("8", "running", "team-b", 1, 8, nodes="n[01-02]", data='{"cost":1}')
    with _session(engine) as s:
        ex.upsert(s, [w, r], cycle_id=1, at=T0)
        s.commit()
        assert ex.live(s) == {"7": ("waiting", ""), "8": ("running", "n[01-02]")}
        ex.upsert(s, [ex.ExplanationRow("7", "running", "team-a", 3, 16, nodes="n03")],
                  cycle_id=2, at=T0 + timedelta(seconds=10))
        ex.mark_gone(s, ["8"], cycle_id=2, at=T0 + timedelta(seconds=10))
        s.commit()
        row = ex.get(s, "7")
        assert row is not None and (row.state, row.reason, row.cycle_id) == ("running", None, 2)
        assert ex.live(s) == {"7": ("running", "n03")}
        ex.drop_gone(s, before=T0 + timedelta(seconds=11))
        s.commit()
        assert [e.job_id for e in s.scalars(select(JobExplanation))] == ["7"]
