"""``railgang api``: serve the admin API with uvicorn on ``api.host``/``api.port``."""

from __future__ import annotations

from typing import Annotated

import typer

from railgang.daemon.errors import DatabaseError


def require_head(url: str) -> None:
    """Refuse to serve (or administer) a database that is not migrated to head."""
    from railgang.db import migrate

    have, want = migrate.current(url), migrate.head()
    if have != want:
        raise DatabaseError(f"database is at revision {have or '(empty)'}, railgang needs "
                            f"{want}: run `railgang db upgrade`")


def api(
    host: Annotated[str | None, typer.Option(help="Listen address (default: api.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: api.port).")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the admin API (quotas, ledger, chargeback, explanations); OpenAPI docs at /docs."""
    import uvicorn

    from railgang.daemon.api.app import create_app
    from railgang.daemon.cli import settings

    cfg = settings()
    require_head(cfg.db.url)
    app = create_app(cfg)
    uvicorn.run(app, host=host or cfg.api.host, port=port or cfg.api.port, log_level=log_level,
                access_log=False)


__all__ = ["api", "require_head"]
