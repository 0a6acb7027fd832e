"""Migrations run for real against SQLite and PostgreSQL, and the models round-trip."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import inspect, select
from sqlalchemy.exc import IntegrityError
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.db import migrate
from railgang.db.base import Base
from railgang.db.models import Account, Job, UsageRecord
from railgang.db.session import make_engine, session_scope
from railgang.errors import DatabaseError

EXPECTED_TABLES = {"accounts", "jobs", "usage_records", "alembic_version"}


def _exercise(url: str) -> None:
    assert migrate.upgrade(url) == migrate.head()
    assert migrate.upgrade(url) == migrate.head()  # idempotent
    engine = make_engine(url)
    assert set(inspect(engine).get_table_names()) >= EXPECTED_TABLES
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    with session_scope(engine) as s:
        org = Account(name="ml-org", level="org", guaranteed_gpus=0, created_at=now)
        team = Account(name="team-a", level="team", parent=org, guaranteed_gpus=64, created_at=now)
        job = Job(slurm_job_id="42", cluster="c", account="team-a", user="alice", gpus=32,
                  priority_class=1, hints="tp=8,pp=4,dp=1", submitted_at=now, state="RUNNING")
        s.add_all([org, team, job])
        s.flush()
        s.add(UsageRecord(job_id=job.id, segment=0, account="team-a", gpu_type="a100", gpus=32,
                          nodes="n[01-04]", started_at=now))
    with session_scope(engine) as s:
        rec = s.scalars(select(UsageRecord)).one()
        assert rec.started_at == now and rec.started_at.tzinfo is not None
        assert s.scalars(select(Account).where(Account.name == "team-a")).one().parent.name == "ml-org"
    # the ledger is idempotent per (job, segment): a restarted daemon cannot record twice
    with pytest.raises(IntegrityError), session_scope(engine) as s:
        s.add(UsageRecord(job_id=rec.job_id, segment=0, account="team-a", gpu_type="a100",
                          gpus=32, nodes="n[01-04]", started_at=now))
    with session_scope(engine) as s:
        assert len(s.scalars(select(UsageRecord)).all()) == 1  # nothing lost, nothing doubled
    engine.dispose()


def test_migrations_on_sqlite(tmp_path: Path) -> None:
    _exercise(f"sqlite:///{tmp_path / 'sub' / 'railgang.sqlite'}")


@pytest.mark.postgres
def test_migrations_on_postgres(postgres_url: str) -> None:
    _exercise(postgres_url)
    engine = make_engine(postgres_url)
    with engine.begin() as conn:  # leave the shared server clean for other tests
        for table in (*Base.metadata.tables, "alembic_version"):  # every table of head
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table} CASCADE")
    engine.dispose()


def test_naive_timestamps_are_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    with pytest.raises(Exception, match="naive datetime"), session_scope(engine) as s:
        s.add(Account(name="x", level="team", guaranteed_gpus=0, created_at=datetime(2026, 1, 1)))
        s.flush()


def test_cli_db_upgrade_and_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_DB__URL", f"sqlite:///{tmp_path / 'cli.sqlite'}")
    runner = CliRunner()
    res = runner.invoke(app, ["db", "upgrade"])
    assert res.exit_code == 0, res.output
    assert f"revision {migrate.head()}" in res.output
    res = runner.invoke(app, ["db", "current"])
    assert f"current: {migrate.head()}" in res.output


def test_unreachable_database_is_a_clear_error() -> None:
    with pytest.raises(DatabaseError, match=r"cannot connect to postgresql\+psycopg://u:\*\*\*@127.0.0.1:1/x"):
        migrate.upgrade("postgresql+psycopg://u:secret@127.0.0.1:1/x")
