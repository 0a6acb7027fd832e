"""Tokens (admin), the audit log (admin), and ``/v1/me``."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Path

from railgang.daemon.api.deps import AdminToken, CurrentToken, PageDep, SessionDep
from railgang.daemon.api.schemas import AuditOut, MeOut, PageOf, TokenCreated, TokenIn, TokenOut
from railgang.db.auth import ApiToken
from railgang.db.repositories import audit, tokens

router = APIRouter(prefix="/v1", tags=["tokens and audit"])


def _token(session: SessionDep, t: ApiToken) -> TokenOut:
    return TokenOut(name=t.name, role=t.role, teams=tokens.team_names(session, t),
                    prefix=t.prefix, created_at=t.created_at, expires_at=t.expires_at,
                    revoked=t.revoked_at is not None)


@router.get("/me", response_model=MeOut)
def me(principal: CurrentToken) -> MeOut:
    return MeOut(name=principal.name, role=principal.role, teams=sorted(principal.teams))


@router.get("/tokens", response_model=list[TokenOut])
def list_tokens(session: SessionDep, _: AdminToken) -> list[TokenOut]:
    return [_token(session, t) for t in tokens.list_tokens(session)]


@router.post("/tokens", status_code=201, response_model=TokenCreated)
def create_token(body: TokenIn, session: SessionDep, admin: AdminToken) -> TokenCreated:
    """A new token; its secret is in the answer once and stored only as a SHA-256."""
    t, secret = tokens.create(session, actor=admin.name, name=body.name, role=body.role,
                              teams=body.teams, expires_at=body.expires_at)
    session.flush()
    return TokenCreated(**_token(session, t).model_dump(), token=secret)


@router.delete("/tokens/{name}", response_model=TokenOut)
def revoke_token(name: Annotated[str, Path(max_length=64)], session: SessionDep,
                 admin: AdminToken) -> TokenOut:
    return _token(session, tokens.revoke(session, actor=admin.name, name=name))


@router.get("/audit", response_model=PageOf[AuditOut])
def audit_log(session: SessionDep, _: AdminToken, page: PageDep) -> PageOf[AuditOut]:
    """Every admin change, newest first: who, what, the object before and after."""
    total, rows = audit.page(session, limit=page.limit, offset=page.offset)
    return PageOf[AuditOut](items=[AuditOut(id=e.id, at=e.at, actor=e.actor, action=e.action,
                                            target=e.target,
                                            before=json.loads(e.before) if e.before else None,
                                            after=json.loads(e.after) if e.after else None)
                                   for e in rows], total=total, limit=page.limit,
                            offset=page.offset)
