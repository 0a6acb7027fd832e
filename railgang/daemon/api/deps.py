"""Request dependencies as ``Annotated`` aliases: ``SessionDep`` (one transaction per request,
committed when the handler returns, rolled back on any error), ``CurrentToken`` (the bearer
token's principal), ``AdminToken`` and ``PageDep``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from railgang.daemon.api import messages
from railgang.db.repositories import tokens
from railgang.db.repositories.tokens import Principal
from railgang.errors import AuthenticationError, PermissionDeniedError, ValidationFailed

_bearer = HTTPBearer(auto_error=False, description="an API token from `railgang token create`")


async def get_session(request: Request) -> AsyncIterator[Session]:
    """A session for the request, once one of ``api.db_sessions`` slots is free: a request
    waiting for a slot waits in the event loop, not in a worker thread, so threads blocked on a
    full connection pool can never starve the requests that hold its connections (with 40
    threads and a pool of 15, a burst of requests used to hang for 30 s and answer 500)."""
    slots: asyncio.Semaphore | None = getattr(request.app.state, "db_slots", None)
    async with slots if slots is not None else contextlib.nullcontext():
        session = request.app.state.sessions()
        try:
            yield session
        except Exception:
            await run_in_threadpool(_end, session, False)
            raise
        await run_in_threadpool(_end, session, True)


def _end(session: Session, commit: bool) -> None:
    """Commit (or roll back) and close in one hop through the thread pool: each hop is a
    thread wake-up and a loop wake-up, and two of them were a tenth of a request's CPU."""
    try:
        if commit:
            session.commit()
        else:
            session.rollback()
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


def current_token(session: SessionDep,
                  creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
                  ) -> Principal:
    if creds is None or not creds.credentials:
        raise AuthenticationError(messages.MISSING_TOKEN)
    return tokens.authenticate(session, creds.credentials)


CurrentToken = Annotated[Principal, Depends(current_token)]


async def admin_token(principal: CurrentToken) -> Principal:  # async: no I/O, no thread hop
    if not principal.is_admin:
        raise PermissionDeniedError(messages.ADMIN_ONLY)
    return principal


AdminToken = Annotated[Principal, Depends(admin_token)]


def require_read(principal: Principal, team: str) -> None:
    if not principal.may_read(team):
        raise PermissionDeniedError(messages.TEAM_SCOPE.format(team=team))


def require_write(principal: Principal, team: str) -> None:
    if not principal.may_write(team):
        raise PermissionDeniedError(messages.TEAM_WRITE.format(team=team))


@dataclass(frozen=True, slots=True)
class Page:
    limit: int
    offset: int


async def page(request: Request,  # async: no I/O, so no hop through the thread pool
         limit: Annotated[int | None, Query(ge=1, description="items per page (max: api.page_max)")]
         = None,
         offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0) -> Page:
    cfg = request.app.state.settings.api
    if limit is not None and limit > cfg.page_max:
        raise ValidationFailed(messages.INVALID_REQUEST,
                               fields={"limit": f"at most {cfg.page_max}"})
    return Page(limit if limit is not None else cfg.page_default, offset)


PageDep = Annotated[Page, Depends(page)]

__all__ = ["AdminToken", "CurrentToken", "Page", "PageDep", "SessionDep", "get_session",
           "require_read", "require_write"]
