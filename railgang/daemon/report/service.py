"""One entry point for the CLI, the daemon's nightly job and the API: parse the day, read the
ledger, build, and (optionally) write. Every failure is one ``RailgangError`` line."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from sqlalchemy.orm import Session

from railgang.daemon.report.build import build_report
from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.data import DAY_S, has_data, load_inputs
from railgang.daemon.report.model import Report
from railgang.daemon.report.render import write_report
from railgang.errors import ExitCode, InputError, RailgangError
from railgang.topology.fabric import Fabric

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class NoReportData(RailgangError):
    """The day is valid but the ledger holds nothing for it (exit 3, API 404)."""

    exit_code = ExitCode.NOT_NOW


MAX_RANGE_DAYS = 92  # a quarter: the report holds every sample of the window in memory


@dataclass(frozen=True, slots=True)
class Day:
    """The report's window: one UTC day, or the days ``day`` to ``last`` (both included)."""

    day: date
    since: int
    until: int
    last: date | None = None

    @property
    def text(self) -> str:
        if self.last is None or self.last == self.day:
            return self.day.isoformat()
        return f"{self.day.isoformat()}..{self.last.isoformat()}"


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


def parse_range(first: str, last: str) -> Day:
    """``--from D1 --to D2``: the UTC days D1 to D2, both included."""
    a = parse_day(first, field="--from")
    b = parse_day(last, field="--to")
    if b.day < a.day:
        raise InputError(f"--to {b.text} is before --from {a.text}", field="--to")
    days = (b.day - a.day).days + 1
    if days > MAX_RANGE_DAYS:
        raise InputError(f"{days} days is more than {MAX_RANGE_DAYS}; report a shorter range",
                         field="--to")
    return Day(a.day, a.since, b.until, last=b.day)


def yesterday(now: datetime) -> str:
    return (now.astimezone(UTC).date() - timedelta(days=1)).isoformat()


def so_far(day: Day, now: datetime) -> Day:
    """The part of ``day`` before ``now``: a day not over yet (today) is reported up to now,
    its capacity, quotas, charts and open segments included, not up to midnight."""
    end = max(day.since, min(day.until, int(now.timestamp())))
    return day if end == day.until else replace(day, until=end)


def make_report(s: Session, day: Day, settings: ReportSettings, *, now: datetime,
                teams: frozenset[str] | None = None, fabric: Fabric | None = None) -> Report:
    window = so_far(day, now)
    if not has_data(s, window.since, window.until):
        raise NoReportData(f"no ledger segments or telemetry for {day.text} (UTC)"
                           f"{' so far' if window.until < day.until else ''}; ingest it "
                           "first (`railgang ledger ingest`) or pick another --date or range")
    th = settings.thresholds
    inputs = load_inputs(s, since=window.since, until=window.until, now=window.until,
                         history_days=th.surge_history_days, recent_s=th.idle_reservation_s,
                         teams=teams)
    return build_report(inputs, settings, date=day.text, generated_at=now, teams=teams,
                        fabric=fabric, partial=window.until < day.until)


def teams_under(s: Session, names: list[str]) -> frozenset[str]:
    """The accounts a report for ``names`` covers: each name, and every account under it in the
    quota tree (a department stands for its teams). A name the tree does not know is kept as
    it is: the ledger holds Slurm's accounts, the tree only those given a quota."""
    from sqlalchemy import select

    from railgang.db.models import Account

    rows = s.execute(select(Account.id, Account.name, Account.parent_id)).all()
    children: dict[int | None, list[tuple[int, str]]] = {}
    for id_, name, parent in rows:
        children.setdefault(parent, []).append((id_, name))
    ids = {name: id_ for id_, name, _ in rows}
    out, todo = set(names), [ids[n] for n in names if n in ids]
    while todo:
        for id_, name in children.get(todo.pop(), []):
            if name not in out:
                out.add(name)
                todo.append(id_)
    return frozenset(out)


def report_dir(root: Path, day: Day) -> Path:
    return root / day.text


def write_day(s: Session, day: Day, settings: ReportSettings, out: Path, *, now: datetime,
              fabric: Fabric | None = None, teams: frozenset[str] | None = None
              ) -> tuple[Report, list[Path]]:
    _check_writable(out)
    report = make_report(s, day, settings, now=now, fabric=fabric, teams=teams)
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


__all__ = ["MAX_RANGE_DAYS", "Day", "NoReportData", "make_report", "parse_day", "parse_range",
           "report_dir", "so_far", "teams_under", "write_day", "yesterday"]
