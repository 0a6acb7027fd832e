"""API tokens: ``rg_<random>`` secrets from ``secrets``, stored as SHA-256 only.

A secret has 256 bits of entropy, so a plain (unsalted) SHA-256 is enough to make a leaked table
useless and lets the API find a token by its hash in one indexed lookup.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from railgang.db.auth import ROLES, ApiToken, ApiTokenTeam
from railgang.db.models import Account
from railgang.db.repositories import audit
from railgang.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    ValidationFailed,
)

PREFIX = "rg_"


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is: the token's name, role and the teams a scoped token may see."""

    name: str
    role: str
    teams: frozenset[str]  # empty for admin (sees everything)

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def may_read(self, team: str) -> bool:
        return self.is_admin or team in self.teams

    def may_write(self, team: str) -> bool:
        return self.is_admin or (self.role == "team-admin" and team in self.teams)


def create(s: Session, *, actor: str, name: str, role: str, teams: list[str],
           expires_at: datetime | None) -> tuple[ApiToken, str]:
    """A new token and its secret (shown once, never stored)."""
    fields: dict[str, str] = {}
    if role not in ROLES:
        fields["role"] = "one of " + ", ".join(ROLES)
    if role != "admin" and not teams:
        fields["teams"] = f"a {role} token needs at least one team"
    if role == "admin" and teams:
        fields["teams"] = "an admin token sees every team; give no teams"
    if expires_at is not None and expires_at <= datetime.now(UTC):
        fields["expires_at"] = "already in the past"
    if fields:
        raise ValidationFailed("invalid token request", fields=fields)
    if s.scalars(select(ApiToken.id).where(ApiToken.name == name)).first() is not None:
        raise ConflictError(f"token {name!r} exists", fields={"name": "already taken"})
    accounts = {a.name: a for a in s.scalars(select(Account).where(Account.name.in_(teams)))}
    missing = [t for t in teams if t not in accounts]
    if missing:
        raise ValidationFailed("unknown teams", fields={"teams": ", ".join(missing)})
    not_team = [t for t in teams if accounts[t].level != "team"]
    if not_team:
        raise ValidationFailed("scope is teams", fields={"teams": f"not teams: {not_team}"})
    secret = PREFIX + secrets.token_urlsafe(32)
    tok = ApiToken(name=name, token_hash=hash_secret(secret), prefix=secret[:10], role=role,
                   created_at=datetime.now(UTC), expires_at=expires_at,
                   teams=[ApiTokenTeam(account_id=accounts[t].id) for t in sorted(set(teams))])
    s.add(tok)
    audit.record(s, actor=actor, action="token.create", target=f"token:{name}", before=None,
                 after={"role": role, "teams": sorted(set(teams)),
                        "expires_at": expires_at.isoformat() if expires_at else None})
    return tok, secret


def team_names(s: Session, tok: ApiToken) -> list[str]:
    ids = [t.account_id for t in tok.teams]
    if not ids:
        return []
    return sorted(s.scalars(select(Account.name).where(Account.id.in_(ids))))


def list_tokens(s: Session) -> list[ApiToken]:
    return list(s.scalars(select(ApiToken).order_by(ApiToken.name)))


def revoke(s: Session, *, actor: str, name: str) -> ApiToken:
    tok = s.scalars(select(ApiToken).where(ApiToken.name == name)).one_or_none()
    if tok is None:
        raise NotFoundError(f"no token {name!r}", fields={"name": "unknown token"})
    if tok.revoked_at is None:
        tok.revoked_at = datetime.now(UTC)
        audit.record(s, actor=actor, action="token.revoke", target=f"token:{name}",
                     before={"revoked": False}, after={"revoked": True})
    return tok


def authenticate(s: Session, secret: str, *, now: datetime | None = None) -> Principal:
    """The principal of a bearer secret; unknown, expired and revoked tokens are refused the
    same way (401) so a caller learns nothing about which tokens exist."""
    now = now or datetime.now(UTC)
    # one query, columns only (the ORM object and its selectin teams were 2-3 queries and a
    # sixth of a request's CPU: every request authenticates)
    rows = s.execute(select(ApiToken.name, ApiToken.role, ApiToken.revoked_at,
                            ApiToken.expires_at, Account.name)
                     .outerjoin(ApiTokenTeam, ApiTokenTeam.token_id == ApiToken.id)
                     .outerjoin(Account, Account.id == ApiTokenTeam.account_id)
                     .where(ApiToken.token_hash == hash_secret(secret))).all()
    if not rows:
        raise AuthenticationError("invalid, expired or revoked token")
    name, role, revoked_at, expires_at, _ = rows[0]
    if revoked_at is not None or (expires_at is not None and expires_at <= now):
        raise AuthenticationError("invalid, expired or revoked token")
    return Principal(name, role, frozenset(r[4] for r in rows if r[4] is not None))


__all__ = ["PREFIX", "Principal", "authenticate", "create", "hash_secret", "list_tokens",
           "revoke", "team_names"]
