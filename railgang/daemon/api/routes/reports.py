"""The daily utilisation report over HTTP: ``GET /v1/reports/{date}`` as HTML (default),
``?format=json`` or ``?format=csv`` (``&table=teams|jobs|pools|queue|anomalies``; ``all`` is the
long form). An admin gets the fleet's report: the one the daemon wrote (``report.dir``: that
night's, or today's so far, marked partial) when present, else built now (a day not over yet
up to now). A team-scoped token gets a report built for its teams only: other teams' rows, top
jobs and anomalies are left out (fleet and pool totals stay, they name no team). A malformed
date is 422, a day without data 404.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from railgang.daemon.api.deps import CurrentToken, SessionDep
from railgang.daemon.report.render import TABLES, to_csv, to_html, to_json
from railgang.daemon.report.service import NoReportData, make_report, parse_day
from railgang.errors import InputError, NotFoundError, ValidationFailed

router = APIRouter(prefix="/v1", tags=["reports"])

Format = Annotated[str, Query(pattern="^(html|json|csv)$",
                              description="html (default), json or csv")]
Table = Annotated[str, Query(pattern="^(all|" + "|".join(TABLES) + ")$",
                             description="with format=csv: one table, or all in long form")]
_MEDIA = {"html": "text/html; charset=utf-8", "json": "application/json",
          "csv": "text/csv; charset=utf-8"}
_DOC: dict[int | str, dict[str, Any]] = {200: {"content": {m: {} for m in _MEDIA.values()},
              "description": "the report as HTML, JSON or CSV"}}


def _stored(root: Path | None, day: str, fmt: str, table: str) -> str | None:
    if root is None:
        return None
    name = {"html": "report.html", "json": "report.json"}.get(
        fmt, "report.csv" if table == "all" else f"{table}.csv")
    path = root / day / name
    try:
        return path.read_text(encoding="utf-8") if path.is_file() else None
    except OSError:
        return None  # unreadable: build it instead


@router.get("/reports/{date}", responses=_DOC, response_class=Response)
def get_report(date: str, request: Request, session: SessionDep, principal: CurrentToken,
               format: Format = "html", table: Table = "all") -> Response:
    """The utilisation report of one UTC day (YYYY-MM-DD)."""
    try:
        day = parse_day(date, field="date")
    except InputError as exc:
        raise ValidationFailed("invalid date", fields={"date": exc.message}) from exc
    settings = request.app.state.settings.report
    teams = None if principal.is_admin else frozenset(principal.teams)
    body = _stored(settings.dir, day.text, format, table) if teams is None else None
    if body is None:
        try:
            rep = make_report(session, day, settings, now=datetime.now(UTC), teams=teams)
        except NoReportData as exc:
            raise NotFoundError(str(exc)) from exc
        body = {"html": to_html, "json": to_json}.get(format, lambda r: to_csv(r, table))(rep)
    return Response(body, media_type=_MEDIA[format])


__all__ = ["router"]
