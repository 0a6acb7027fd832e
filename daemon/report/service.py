"""One entry point for the CLI, the daemon's nightly job and the API: parse the day, read the
ledger, build, and (optionally) write. Every failure is one ``RailgangError`` line."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from sqlalchemy.orm import Session

from railgang.daemon.errors import ExitCode, InputError, RailgangError
from railgang.daemon.report.build import build_report
from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.data import DAY_S, has_data, load_inputs
from railgang.daemon.report.model import Report
from railgang.daemon.report.render import write_report
from railgang.topology.fabric import Fabric

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class NoReportData(RailgangError):
    """The day is valid but the ledger holds nothing for it (exit 3, API 404)."""

    exit_code = ExitCode.NOT_NOW


@dataclass(frozen=True, slots=True)
class Day:
    day: date
    since: int
    until: int

    @property
    def text(self) -> str:
        return self.day.isoformat()


LAST_DAY = date(9998, 12, 31)


def parse_day(text: str, *, field: str = "--date") -> Day:
    """``YYYY-MM-DD`` (a UTC day) -> its window; anything else is one clear error."""
    if not _DATE.match(text.strip()):
        raise InputError(f"{text!r} is not a date; use YYYY-MM-DD (a UTC day)", field=field)
    try:
        d = date.fromisoformat(text.strip())
    except ValueError as exc:
        raise InputError(f"{text!r} is not a calendar date ({exc})", field=field) from exc
    if d.year < 1971:
        raise InputError(f"{text!r} is before the ledger's epoch", field=field)
    if d > LAST_DAY:  # the report reads the day after too (and its epoch seconds): year 10000
        raise InputError(f"{text!r} is after {LAST_DAY.isoformat()}, the last day a report covers",
                         field=field)
    since = int(datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp())
    return Day(d, since, since + DAY_S)


def yesterday(now: datetime) -> str:
    return (now.astimezone(UTC).date() - timedelta(days=1)).isoformat()


def make_report(s: Session, day: Day, settings: ReportSettings, *, now: datetime,
                teams: frozenset[str] | None = None, fabric: Fabric | None = None) -> Report:
    if not has_data(s, day.since, day.until):
        raise NoReportData(f"no ledger segments or telemetry for {day.text} (UTC); ingest it "
                           "first (`railgang ledger ingest`) or pick another --date")
    th = settings.thresholds
    inputs = load_inputs(s, since=day.since, until=day.until,
                         now=min(int(now.timestamp()), day.until),
                         history_days=th.surge_history_days, recent_s=th.idle_reservation_s,
                         teams=teams)
    return build_report(inputs, settings, date=day.text, generated_at=now, teams=teams,
                        fabric=fabric)


def report_dir(root: Path, day: Day) -> Path:
    return root / day.text


def write_day(s: Session, day: Day, settings: ReportSettings, out: Path, *, now: datetime,
              fabric: Fabric | None = None) -> tuple[Report, list[Path]]:
    _check_writable(out)
    report = make_report(s, day, settings, now=now, fabric=fabric)
    return report, write_report(report, out)


def _check_writable(out: Path) -> None:
    """Refuse an unwritable --out before spending time on the build."""
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    import os

    if probe.exists() and not probe.is_dir():
        raise InputError("exists and is not a directory", path=str(probe), field="--out")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise InputError("directory is not writable; choose another --out", path=str(probe),
                         field="--out")


__all__ = ["Day", "NoReportData", "make_report", "parse_day", "report_dir", "write_day",
           "yesterday"]
