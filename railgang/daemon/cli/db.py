"""``railgang db upgrade|current``."""

from __future__ import annotations

from typing import Annotated

import typer

from railgang.daemon.cli.common import JsonOpt, emit, settings_from

app = typer.Typer(help="Database migrations (SQLite by default, PostgreSQL by URL).",
                  no_args_is_help=True)

UrlOpt = Annotated[str | None, typer.Option("--url", help="Database URL (default: db.url).")]


def _url(ctx: typer.Context, url: str | None) -> str:
    return url or settings_from(ctx).db.url


@app.command("upgrade")
def upgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    url: UrlOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Apply Alembic migrations up to REVISION (default: head). Safe to run repeatedly."""
    from railgang.db import migrate

    target = _url(ctx, url)
    rev = migrate.upgrade(target, revision)
    emit({"revision": rev, "url": _redact(target)}, as_json,
         f"database at revision {rev} ({_redact(target)})")


@app.command("current")
def current(ctx: typer.Context, url: UrlOpt = None, as_json: JsonOpt = False) -> None:
    """Print the database's current revision and the newest one available."""
    from railgang.db import migrate

    target = _url(ctx, url)
    have, head = migrate.current(target), migrate.head()
    emit({"current": have, "head": head, "up_to_date": have == head, "url": _redact(target)},
         as_json, f"current: {have or '(empty database)'}  head: {head}")


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)
