"""Times and days on the command line: ISO forms, and relative ones as ``date -d`` and Grafana
take them: ``now``, ``today``, ``yesterday``, ``tomorrow``, each optionally followed by ``+N`` or
``-N`` and a unit (``now-1day``, ``now-90m``, ``today-1w``, ``yesterday+12h``). Every time is UTC
(a naive ISO time is read as UTC). Units: s, m (minutes), h, d, w, in any of their spellings
(``min``, ``mins``, ``minute``, ``minutes``, ``hour``, ``days``, ``week`` …).

Pure: ``now`` is given. The command line's parser (``cli.common.when_option``) reads the clock.

Printed back, a time is relative, one way everywhere (``explain``, ``daemon status``, ``top``):
:func:`from_now` ("in 3 min"), :func:`ago` ("5 min ago"), :func:`span` ("45 s", "3.0 h").
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from railgang.errors import InputError

UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
         "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
         "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
         "d": 86400, "day": 86400, "days": 86400,
         "w": 604800, "week": 604800, "weeks": 604800}
_RELATIVE = re.compile(r"(now|today|yesterday|tomorrow)(?:\s*([+-])\s*(\d+)\s*([a-z]+))?")
HELP = "UTC; YYYY-MM-DD[THH:MM[:SS]], or relative: now-1day, now-2h, today, yesterday"


def parse_when(text: str, now: datetime, *, field: str | None = None) -> datetime:
    """``text`` as an aware UTC datetime, relative forms counted from ``now``."""
    raw = text.strip().lower()
    m = _RELATIVE.fullmatch(raw)
    if m:
        base, sign, amount, unit = m.groups()
        midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        t = {"now": now.astimezone(UTC), "today": midnight,
             "yesterday": midnight - timedelta(days=1),
             "tomorrow": midnight + timedelta(days=1)}[base]
        if sign is None:
            return t
        if unit not in UNITS:
            raise InputError(f"{text!r}: unknown unit {unit!r} (one of s, m, h, d, w)", field=field)
        try:
            step = timedelta(seconds=int(amount) * UNITS[unit])
            return t + step if sign == "+" else t - step
        except OverflowError as exc:
            raise InputError(f"{text!r} is out of range", field=field) from exc
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"{text!r} is not a time ({HELP})", field=field) from exc
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def parse_day(text: str, now: datetime, *, field: str | None = None) -> date:
    """A UTC day: ``YYYY-MM-DD`` or a relative form (``yesterday``, ``today-7d``, ``now-1day``)."""
    return parse_when(text, now, field=field).date()


def relative_day(text: str | None, now: datetime, *, field: str | None = None) -> str | None:
    """A relative form (``yesterday``, ``today-7d``, ``now-1day``) as ``YYYY-MM-DD``; anything else
    unchanged, for a reader that checks ISO days itself (``railgang report``)."""
    if text is None or not _RELATIVE.fullmatch(text.strip().lower()):
        return text
    return parse_day(text, now, field=field).isoformat()


def span(seconds: float) -> str:
    """A duration as people read it: ``45 s``, ``5 min``, ``3.0 h``, ``3.0 d`` (never negative)."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def ago(seconds: float) -> str:
    """``5 min ago`` (a clock a little ahead of ours reads ``0 s ago``)."""
    return f"{span(seconds)} ago"


def from_now(seconds: float) -> str:
    """``in 3 min``; under a second: ``now``."""
    return f"in {span(seconds)}" if seconds >= 1 else "now"


__all__ = ["HELP", "UNITS", "ago", "from_now", "parse_day", "parse_when", "relative_day", "span"]
