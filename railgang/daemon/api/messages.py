"""Message constants of the API (one place to read and to reword them)."""

from __future__ import annotations

MISSING_TOKEN = "missing bearer token: send 'Authorization: Bearer rg_...' (railgang token create)"
ADMIN_ONLY = "this needs an admin token"
TEAM_SCOPE = "this token is not scoped to team {team!r}"
TEAM_WRITE = "this token may not change team {team!r} (needs admin or that team's team-admin)"
NOT_FOUND = "no such path: {path}"
METHOD = "method {method} is not allowed on {path}"
INVALID_REQUEST = "the request is invalid; see fields"
INTERNAL = "internal error; the server log has the details"
CONFLICT = "the change conflicts with the stored data (try again)"
NO_EXPLANATION = "the daemon has no record of job {job!r} (not seen, or gone too long ago)"
BAD_WINDOW = "since must be before until"
BODY_TOO_LARGE = "the request body is larger than {limit} bytes (api.max_body_bytes)"
BAD_CONTENT_LENGTH = "the Content-Length header is not a number of bytes"
BAD_BODY = "the request body is not valid JSON (or not UTF-8 text)"
LOSE_PROPOSAL_ADMIN_ONLY = ("a lose-proposal needs an admin token: it pauses the team's "
                            "use-it-or-lose-it review (team-admins may record borrow/reclaim and "
                            "propose a restore)")

__all__ = ["ADMIN_ONLY", "BAD_BODY", "BAD_CONTENT_LENGTH", "BAD_WINDOW", "BODY_TOO_LARGE", "CONFLICT", "INTERNAL", "INVALID_REQUEST",
           "LOSE_PROPOSAL_ADMIN_ONLY", "METHOD",
           "MISSING_TOKEN", "NOT_FOUND", "NO_EXPLANATION", "TEAM_SCOPE", "TEAM_WRITE"]
