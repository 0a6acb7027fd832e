"""``railgang api``: serve the admin API with uvicorn on ``api.host``/``api.port``."""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Annotated, Literal

import typer

from railgang.daemon.cli.common import state_from
from railgang.daemon.service.logs import LogFormat, logging_config

UvicornLevel = Literal["critical", "error", "warning", "info", "debug", "trace"]


def api(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="Listen address (default: api.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: api.port).")] = None,
    log_level: Annotated[UvicornLevel, typer.Option(help="uvicorn log level.")] = "info",
    workers: Annotated[int, typer.Option(min=1, max=64, help="uvicorn worker processes "
                                         "(each with its own database pool).")] = 1,
    log_format: Annotated[LogFormat, typer.Option(
        "--log-format", help="json (one object per line) or text.")] = "text",
) -> None:
    """Serve the admin API (quotas, ledger, chargeback, explanations); OpenAPI docs at /docs."""
    import uvicorn

    from railgang.daemon.api.app import create_app, freeze_startup_heap
    from railgang.db import migrate

    state = state_from(ctx)
    cfg = state.settings()
    migrate.require_head(cfg.db.url)
    bind = {"host": host or cfg.api.host, "port": port or cfg.api.port, "log_level": log_level,
            "access_log": False, "log_config": logging_config(log_format, log_level)}
    if workers == 1:
        app = create_app(cfg)
        freeze_startup_heap()
        uvicorn.run(app, **bind)  # type: ignore[arg-type]
        return
    if state.config_path is not None:  # the workers load the same file
        os.environ["RAILGANG_CONFIG"] = str(state.config_path)
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("railgang.daemon.api.app:app_from_env", factory=True,
                            workers=workers, **bind)  # type: ignore[arg-type]
    sock = tcp_socket(str(bind["host"]), int(bind["port"]))  # type: ignore[call-overload]
    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(config, sockets=[sock]).run()


def tcp_socket(host: str, port: int) -> socket.socket:
    """The workers' shared listening socket, made as a TCP socket (proto IPPROTO_TCP).

    uvicorn's own (``uvicorn.run(workers=N)``) has proto 0, and asyncio turns Nagle off
    (TCP_NODELAY) only on accepted sockets whose proto is TCP: every answer of ``--workers 2``
    then waited for the client's delayed ACK, 44 ms per request against 0.6 ms with one worker
    (uvicorn 0.54, a two-line ASGI app)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"railgang api: cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock


__all__ = ["api", "tcp_socket"]
