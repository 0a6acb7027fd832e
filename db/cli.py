"""``railgang db upgrade|current``."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(help="Database migrations (SQLite by default, PostgreSQL by URL).",
                  no_args_is_help=True)


def _url(url: str | None) -> str:
    from railgang.daemon.cli import settings

    return url or settings().db.url


@app.command("upgrade")
def upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    url: Annotated[str | None, typer.Option(help="Database URL (default: db.url).")] = None,
) -> None:
    """Apply Alembic migrations up to REVISION (default: head). Safe to run repeatedly."""
    from railgang.db import migrate

    target = _url(url)
    rev = migrate.upgrade(target, revision)
    typer.echo(f"database at revision {rev} ({_redact(target)})")


@app.command("current")
def current(
    url: Annotated[str | None, typer.Option(help="Database URL (default: db.url).")] = None,
) -> None:
    """Print the database's current revision and the newest one available."""
    from railgang.db import migrate

    target = _url(url)
    typer.echo(f"current: {migrate.current(target) or '(empty database)'}  head: {migrate.head()}")


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
