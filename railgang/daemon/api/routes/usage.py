"""Usage, showback/chargeback and utilisation tiers from the ledger (JSON or ``?format=csv``).

All three are one SQL aggregation (db.repositories.ledger.usage) over the segments that overlap
``[since, until)``, each counted only for its part inside the window; open segments count up to
now. A team-scoped token sees only its teams' rows. Answers over an ended window are cached
per worker under the ledger's version (daemon/api/cache.py).
"""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from railgang.daemon.api import messages
from railgang.daemon.api.cache import TtlCache, ledger_version
from railgang.daemon.api.deps import CurrentToken, PageDep, SessionDep
from railgang.daemon.api.schemas import UsageOut, UsageRow
from railgang.daemon.safe_output import CsvWriter
from railgang.db.repositories import ledger
from railgang.errors import ValidationFailed

router = APIRouter(prefix="/v1", tags=["usage and chargeback"])

Since = Annotated[datetime | None, Query(description="window start (ISO 8601; default: until − 30 days)")]
Until = Annotated[datetime | None, Query(description="window end (ISO 8601; default: now)")]
GroupBy = Annotated[str, Query(max_length=200, description=(
    "comma-separated: " + ", ".join(ledger.DIMENSIONS)))]
Label = Annotated[str | None, Query(max_length=32, pattern=r"^[A-Za-z0-9_.-]+$",
                                    description="label key for group_by=label")]
Format = Annotated[str, Query(pattern="^(json|csv)$")]
CSV_METRICS = ("gpu_seconds", "gpu_hours", "compute_gpu_seconds", "productive_gpu_seconds",
               "cost", "unpriced_gpu_seconds")


def _aware(t: datetime) -> datetime:
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def _window(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    hi = _aware(until) if until is not None else datetime.now(UTC)
    lo = _aware(since) if since is not None else hi - timedelta(days=30)
    if lo >= hi:
        raise ValidationFailed(messages.BAD_WINDOW, fields={"since": "must be before until"})
    if hi.year > 9000 or lo.year < 1971:
        raise ValidationFailed(messages.INVALID_REQUEST, fields={"since": "1971..9000"})
    return lo, hi


async def _cache(request: Request) -> TtlCache:
    return request.app.state.usage_cache  # type: ignore[no-any-return]


CacheDep = Annotated[TtlCache, Depends(_cache)]


def _query(session: SessionDep, principal: CurrentToken, page: PageDep, cache: TtlCache,
           since: Since, until: Until, group_by: str, label: str | None, fmt: str) -> Any:
    lo, hi = _window(since, until)
    dims = tuple(d.strip() for d in group_by.split(",") if d.strip())
    now = int(datetime.now(UTC).timestamp())
    q = ledger.UsageQuery(since=int(lo.timestamp()), until=int(hi.timestamp()), now=now,
                          group_by=dims, label=label,
                          teams=None if principal.is_admin else frozenset(principal.teams),
                          limit=page.limit, offset=page.offset)
    if q.until <= now:  # an ended window: the answer depends on the database only
        key = (replace(q, now=0), ledger_version(session))
        total, rows = cache.get_or_compute(key, lambda: ledger.usage(session, q))
    else:
        total, rows = ledger.usage(session, q)
    if fmt == "csv":
        buf = io.StringIO()
        w = CsvWriter(buf)  # a label or a name is a user's text: no formula reaches a sheet
        w.writerow([*dims, *CSV_METRICS])
        for r in rows:
            w.writerow([r[d] for d in dims] + ["" if r[m] is None else r[m] for m in CSV_METRICS])
        return Response(buf.getvalue(), media_type="text/csv",
                        headers={"X-Total-Count": str(total)})
    return UsageOut(items=[UsageRow(**r) for r in rows], total=total, limit=page.limit,
                    offset=page.offset, since=lo, until=hi, group_by=list(dims))


_DOC = {200: {"content": {"text/csv": {}}, "description": "JSON, or CSV with ?format=csv"}}


@router.get("/usage", response_model=UsageOut, responses=_DOC)  # type: ignore[arg-type]
def usage(session: SessionDep, principal: CurrentToken, page: PageDep, cache: CacheDep,
          since: Since = None, until: Until = None, group_by: GroupBy = "team",
          label: Label = None, format: Format = "json") -> Any:
    """GPU-seconds allocated, compute and productive, grouped as asked."""
    return _query(session, principal, page, cache, since, until, group_by, label, format)


@router.get("/chargeback", response_model=UsageOut, responses=_DOC)  # type: ignore[arg-type]
def chargeback(session: SessionDep, principal: CurrentToken, page: PageDep, cache: CacheDep,
               since: Since = None, until: Until = None,
               group_by: GroupBy = "team,gpu_type,capacity", label: Label = None,
               format: Format = "json") -> Any:
    """GPU-hours × rate (by GPU type and capacity tier); unpriced GPU-seconds listed apart."""
    return _query(session, principal, page, cache, since, until, group_by, label, format)


@router.get("/utilisation", response_model=UsageOut, responses=_DOC)  # type: ignore[arg-type]
def utilisation(session: SessionDep, principal: CurrentToken, page: PageDep, cache: CacheDep,
                since: Since = None, until: Until = None, group_by: GroupBy = "team",
                label: Label = None, format: Format = "json") -> Any:
    """The three tiers (allocated, compute, productive) per group; compute and productive are
    null where no telemetry covered the segments."""
    return _query(session, principal, page, cache, since, until, group_by, label, format)
