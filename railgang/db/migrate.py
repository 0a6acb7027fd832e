"""Run Alembic migrations programmatically (``railgang db upgrade``) against any configured URL."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from railgang.db.session import check_connection, make_engine
from railgang.errors import DatabaseError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # '%' would be read as interpolation by configparser
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> str | None:
    """Migrate the database at ``url`` to ``revision``; return the revision it is at afterwards."""
    engine = make_engine(url)
    try:
        check_connection(engine)
    finally:
        engine.dispose()
    try:
        command.upgrade(alembic_config(url), revision)
    except OperationalError as exc:
        raise DatabaseError(f"migration failed: {exc.orig}") from exc
    return current(url)


def current(url: str) -> str | None:
    engine = make_engine(url)
    try:
        check_connection(engine)
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head() -> str | None:
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def require_head(url: str) -> None:
    """Refuse to serve (or administer) a database that is not migrated to head."""
    have, want = current(url), head()
    if have != want:
        raise DatabaseError(f"database is at revision {have or '(empty)'}, railgang needs "
                            f"{want}: run `railgang db upgrade`")


def engine_at_head(url: str) -> Engine:
    """An engine on ``url`` once the database is known to be at head (the commands' way in)."""
    require_head(url)
    return make_engine(url)


__all__ = ["current", "engine_at_head", "head", "require_head", "upgrade"]
