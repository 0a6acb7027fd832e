"""``railgang token …``: API tokens on the database directly (same repository as the API,
audited as ``cli:<user>``, as ``railgang quota`` is)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer

from railgang.daemon.cli.common import JsonOpt, choices_metavar, emit, registry_choice
from railgang.daemon.cli.quota import actor, session
from railgang.db.choices import ROLES

token_app = typer.Typer(help="API tokens (stored hashed; the secret is shown once).",
                        no_args_is_help=True)


@token_app.command("create")
def token_create(ctx: typer.Context, name: str,
                 role: Annotated[str, typer.Option(
                     callback=registry_choice(lambda: ROLES), metavar=choices_metavar(ROLES),
                     help="What the token may do.")],
                 team: Annotated[list[str] | None, typer.Option(help="Team in scope (repeat).")]
                 = None,
                 expires_days: Annotated[float | None, typer.Option(min=0.001)] = None,
                 as_json: JsonOpt = False) -> None:
    """Create a token and print its secret (once: only a SHA-256 is stored)."""
    from railgang.db.repositories import tokens

    expires = datetime.now(UTC) + timedelta(days=expires_days) if expires_days else None
    with session(ctx) as s:
        _, secret = tokens.create(s, actor=actor(), name=name, role=role, teams=team or [],
                                  expires_at=expires)
    emit({"name": name, "role": role, "teams": team or [], "token": secret}, as_json,
          [secret])


@token_app.command("list")
def token_list(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Tokens with role, teams, prefix, expiry and whether revoked (never the secret)."""
    from railgang.db.repositories import tokens

    with session(ctx) as s:
        data: list[dict[str, Any]] = [{"name": t.name, "role": t.role, "teams": tokens.team_names(s, t),
                 "prefix": t.prefix, "expires_at": t.expires_at,
                 "revoked": t.revoked_at is not None} for t in tokens.list_tokens(s)]
    emit(data, as_json, token_table(data, datetime.now(UTC)) if data else ["(no tokens)"])


def token_table(data: list[dict[str, Any]], now: datetime) -> list[str]:
    """``token list`` as aligned columns under a header, as squeue prints; the expiry as a date
    and how far off (``in 7.0 d``, ``2.0 h ago``); STATE: active, expired or revoked."""
    from railgang.daemon.safe_output import term_safe
    from railgang.daemon.when import ago, from_now

    rows = [["NAME", "ROLE", "TEAMS", "PREFIX", "EXPIRES", "STATE"]]
    for d in data:
        exp = d["expires_at"]
        if exp is not None and exp.tzinfo is None:
            exp = exp.replace(tzinfo=UTC)  # stored as UTC; SQLite may hand it back naive
        left: float | None = None
        when = "never"
        if exp is not None:
            left = (exp - now).total_seconds()
            when = f"{exp:%Y-%m-%d %H:%M} UTC ({from_now(left) if left > 0 else ago(-left)})"
        state = ("revoked" if d["revoked"] else "expired" if left is not None and left <= 0
                 else "active")
        rows.append([term_safe(d["name"]), d["role"], term_safe(",".join(d["teams"]) or "*"),
                     f"{d['prefix']}…", when, state])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]])
            for r in rows]


@token_app.command("revoke")
def token_revoke(ctx: typer.Context, name: str, as_json: JsonOpt = False) -> None:
    """Revoke a token at once (it answers 401 from then on)."""
    from railgang.db.repositories import tokens

    with session(ctx) as s:
        tokens.revoke(s, actor=actor(), name=name)
    emit({"name": name, "revoked": True}, as_json, f"token {name} revoked")


__all__ = ["token_app", "token_table"]
