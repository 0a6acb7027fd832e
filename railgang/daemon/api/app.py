"""The FastAPI application: routes by feature, one error format, metrics and health.

Requests pass ``guard.RequestGuard`` first: a body is bounded (``api.max_body_bytes``, 413) and
read only after the bearer token is checked (401). Every error answers
``{"error": {"code", "message", "fields"}}``: domain errors
(``railgang.errors.DomainError``) with their own status, request validation as 422 with
one entry per failing field, unknown paths as 404, database conflicts as 409, anything else as
500 (logged, never shown).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from sqlalchemy import Engine, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import sessionmaker
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from railgang.daemon import __version__
from railgang.daemon.api import messages
from railgang.daemon.api.cache import TtlCache
from railgang.daemon.api.guard import RequestGuard
from railgang.daemon.api.routes import admin, jobs, org, policy, reports, serving, usage
from railgang.daemon.api.schemas import ErrorResponse
from railgang.daemon.build_info import register_build_info
from railgang.daemon.config import Settings
from railgang.db.repositories import tokens
from railgang.db.session import make_engine, unit_of_work
from railgang.errors import DomainError

log = logging.getLogger(__name__)


def error(status: int, code: str, message: str, fields: dict[str, str] | None = None,
          headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, headers=headers,
                        content={"error": {"code": code, "message": message,
                                           "fields": fields or {}}})


def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or str(loc[0] if loc else "request")


def _install_handlers(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def _domain(_: Request, exc: DomainError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error(exc.status, exc.code, exc.message, exc.fields, headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        fields: dict[str, str] = {}
        for e in exc.errors():
            fields.setdefault(_field(tuple(e.get("loc", ()))), str(e.get("msg", "invalid")))
        return error(422, "validation_failed", messages.INVALID_REQUEST, fields)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error(404, "not_found", messages.NOT_FOUND.format(path=request.url.path))
        if exc.status_code == 405:
            return error(405, "method_not_allowed", messages.METHOD.format(
                method=request.method, path=request.url.path))
        if exc.status_code == 413:
            return error(413, "payload_too_large", str(exc.detail), headers={"Connection": "close"})
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            return error(400, "bad_request", messages.BAD_BODY)  # FastAPI's: too deep, bad bytes
        return error(exc.status_code, "http_error", str(exc.detail))

    @app.exception_handler(IntegrityError)
    async def _conflict(_: Request, exc: IntegrityError) -> JSONResponse:
        log.info("api: integrity conflict: %s", exc.orig)
        return error(409, "conflict", messages.CONFLICT)

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("api: unhandled error")
        return error(500, "internal", messages.INTERNAL)


def _install_metrics(app: FastAPI, registry: CollectorRegistry) -> None:
    requests = Counter("railgang_api_requests", "API requests", ["route", "method", "status"],
                       registry=registry)
    latency = Histogram("railgang_api_request_seconds", "API request latency", ["route"],
                        registry=registry,
                        buckets=(.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5))

    def measure(inner: ASGIApp) -> ASGIApp:
        # plain ASGI, not @app.middleware("http"): BaseHTTPMiddleware runs each request's app
        # in a task of its own with a memory stream for the body, a cost on every request
        async def measured(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await inner(scope, receive, send)
                return
            t0 = time.perf_counter()
            status = 500  # an exception that escapes the app is answered 500 outside

            async def watch(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await inner(scope, receive, watch)
            finally:
                name = getattr(scope.get("route"), "path", "unmatched")
                latency.labels(name).observe(time.perf_counter() - t0)
                requests.labels(name, scope["method"], str(status)).inc()

        return measured

    app.add_middleware(measure)


def create_app(settings: Settings, *, engine: Engine | None = None) -> FastAPI:
    """The app for ``settings``; the engine is built when the app starts (or given, in tests)."""
    settings.check_secrets()
    registry = CollectorRegistry()
    register_build_info(registry, "api")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own = app.state.engine is None
        app.state.db_slots = asyncio.Semaphore(settings.api.db_sessions)  # this loop's
        if own:
            app.state.engine = make_engine(settings.db.url, echo=settings.db.echo)
            app.state.sessions = sessionmaker(app.state.engine, expire_on_commit=False)
        yield
        if own:
            app.state.engine.dispose()

    app = FastAPI(title="railgang admin API", version=__version__, lifespan=lifespan,
                  description="Quotas, usage ledger, chargeback and job explanations. "
                              "Bearer tokens: `railgang token create`. Errors: "
                              "`{\"error\": {\"code\", \"message\", \"fields\"}}`.",
                  responses={401: {"model": ErrorResponse}, 403: {"model": ErrorResponse},
                             422: {"model": ErrorResponse}})
    app.state.settings = settings
    app.state.usage_cache = TtlCache(settings.api.cache_seconds, settings.api.cache_entries)
    app.state.engine = engine
    app.state.sessions = sessionmaker(engine, expire_on_commit=False) if engine else None
    _install_handlers(app)

    def authenticate(secret: str) -> None:
        with unit_of_work(app.state.sessions) as session:
            tokens.authenticate(session, secret)

    # before the metrics middleware, so that it wraps (and counts) what the guard refuses
    app.add_middleware(RequestGuard, max_body_bytes=settings.api.max_body_bytes,
                       authenticate=authenticate, reply=error)
    _install_metrics(app, registry)
    for module in (org, usage, policy, jobs, admin, reports, serving):
        app.include_router(module.router)

    @app.get("/healthz", tags=["service"])
    def healthz() -> dict[str, str]:
        """200 when the database answers (no token needed)."""
        try:
            with app.state.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except OperationalError:
            return JSONResponse(status_code=503, content={"status": "degraded",  # type: ignore[return-value]
                                                          "db": "unreachable"})
        return {"status": "ok", "db": "ok"}

    @app.get("/metrics", tags=["service"], response_class=Response)
    def metrics() -> Response:
        """Prometheus text format (request counts and latencies per route)."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app


def freeze_startup_heap() -> None:
    """Move what the process holds before it serves (modules, routes, schemas, ~130,000
    objects) out of the garbage collector's reach: they are never garbage, and each full
    collection walked them all, a 130-260 ms stall of every request in flight at 200 req/s on
    2 busy cores (gc.callbacks in the workers, BENCHMARKS.md). Called once per server process."""
    gc.collect()
    gc.freeze()


def app_from_env() -> FastAPI:
    """App factory for uvicorn worker processes (``railgang api --workers N``): each worker
    reads the same configuration (RAILGANG_CONFIG and RAILGANG_* variables)."""
    from railgang.daemon.config import load_settings

    app = create_app(load_settings())
    freeze_startup_heap()
    return app


__all__ = ["app_from_env", "create_app", "error", "freeze_startup_heap"]
