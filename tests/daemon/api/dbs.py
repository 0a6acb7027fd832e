"""Fresh migrated databases for the API and ledger tests: a SQLite file, or a private schema on
the session's real PostgreSQL (so tests never see each other's rows or other helpers' tables)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from railgang.db import migrate
from railgang.db.session import make_engine


@contextmanager
def fresh_url(kind: str, tmp_path: Path, pg_url: str | None = None) -> Iterator[str]:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'railgang.sqlite'}"
        migrate.upgrade(url)
        yield url
        return
    assert pg_url is not None
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(pg_url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    url = make_url(pg_url).update_query_dict({"options": f"-csearch_path={schema}"})
    text = url.render_as_string(hide_password=False)
    try:
        migrate.upgrade(text)
        yield text
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


@contextmanager
def fresh_engine(kind: str, tmp_path: Path, pg_url: str | None = None) -> Iterator[Engine]:
    with fresh_url(kind, tmp_path, pg_url) as url:
        engine = make_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


__all__ = ["fresh_engine", "fresh_url"]
