"""Engine and session handling. Nothing is built at import time; callers own transactions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from railgang.db.urls import mask_url  # a message must not show the password
from railgang.errors import DatabaseError


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine; for SQLite, make the parent folder and turn on foreign keys and WAL."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise DatabaseError(f"db.url: cannot parse {mask_url(url)!r} (expected "
                            "dialect+driver://user:password@host:port/database)") from exc
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        folder = Path(parsed.database).expanduser().parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file where the folder should be, no permission
            raise DatabaseError(f"db.url: cannot make the folder {folder} of the SQLite "
                                f"database: {exc.strerror}") from exc
    engine = create_engine(url, echo=echo, pool_pre_ping=True)
    if parsed.get_backend_name() == "sqlite":

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # type: ignore[no-untyped-def]
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

    return engine


def check_connection(engine: Engine) -> None:
    """Connect once; an unreachable database is one :class:`DatabaseError` line (the driver's
    first line: psycopg adds "Is the server running...?" on a second), its secrets masked."""
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        first = (str(exc.orig).strip().splitlines() or [type(exc.orig).__name__])[0]
        raise DatabaseError(f"cannot connect to "
                            f"{mask_url(engine.url.render_as_string(hide_password=True))}: "
                            f"{first}") from exc


@contextmanager
def unit_of_work(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work from ``factory``: commit on success, roll back on error. Repositories
    never commit; the caller that owns the transaction (a cycle, a request) uses this."""
    with factory() as session:
        try:
            yield session
            session.commit()
        except Exception:
            session.rollback()
            raise


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """:func:`unit_of_work` on a fresh session factory for ``engine``."""
    with unit_of_work(sessionmaker(engine, expire_on_commit=False)) as session:
        yield session


__all__ = ["check_connection", "make_engine", "session_scope", "unit_of_work"]
