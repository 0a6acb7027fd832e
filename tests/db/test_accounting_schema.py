"""Migration 0003 matches the models exactly (no autogenerate diff) on SQLite and PostgreSQL,
seeds the four priority classes, and carries pre-0003 ledger rows over with their epochs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import select, text

from railgang.db import migrate
from railgang.db.base import Base
from railgang.db.org import PriorityClass
from railgang.db.session import make_engine, session_scope
from tests.daemon.api.dbs import fresh_url


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_head_matches_the_models(kind: str, tmp_path: Path, request: pytest.FixtureRequest
                                 ) -> None:
    pg = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    with fresh_url(kind, tmp_path, pg) as url:
        engine = make_engine(url)
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        with session_scope(engine) as s:
            classes = s.scalars(select(PriorityClass.name).order_by(PriorityClass.id)).all()
        engine.dispose()
    assert diff == []
    assert classes == ["serving", "production", "interactive", "batch"]


def test_rows_from_before_0003_get_their_epochs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    migrate.upgrade(url, "0002")
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO jobs (slurm_job_id, cluster, account, user, gpus, "
                          "priority_class, hints, submitted_at, state) VALUES ('1', 'c', 'a', "
                          "'u', 8, 3, '', '2026-11-29 12:00:00.000000', 'COMPLETED')"))
        conn.execute(text("INSERT INTO usage_records (job_id, segment, account, gpu_type, gpus, "
                          "nodes, started_at, ended_at, tier) VALUES (1, 0, 'a', 'h', 8, 'n1', "
                          "'2026-11-29 12:00:00.000000', '2026-11-29 13:00:00.000000', "
                          "'guaranteed')"))
    migrate.upgrade(url)
    with engine.connect() as conn:
        got = conn.execute(text("SELECT start_epoch, end_epoch, capacity FROM usage_records")).one()
    start = int(datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp())
    assert tuple(got) == (start, start + 3600, "reserved")
    command.downgrade(migrate.alembic_config(url), "0002")
    assert migrate.current(url) == "0002"
    engine.dispose()
