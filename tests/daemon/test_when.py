"""Times on the command line: ISO and relative forms (``now-1day``, ``yesterday``), all UTC."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.when import parse_day, parse_when, relative_day
from railgang.errors import InputError

NOW = datetime(2026, 12, 1, 15, 30, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("now-1day", NOW - timedelta(days=1)),
        ("now-1d", NOW - timedelta(days=1)),
        ("now - 2 hours", NOW - timedelta(hours=2)),
        ("NOW-90MIN", NOW - timedelta(minutes=90)),
        ("now+30s", NOW + timedelta(seconds=30)),
        ("today", datetime(2026, 12, 1, tzinfo=UTC)),
        ("yesterday", datetime(2026, 11, 30, tzinfo=UTC)),
        ("tomorrow", datetime(2026, 12, 2, tzinfo=UTC)),
        ("today-1w", datetime(2026, 11, 24, tzinfo=UTC)),
        ("yesterday+12h", datetime(2026, 11, 30, 12, tzinfo=UTC)),
        ("2026-11-30", datetime(2026, 11, 30, tzinfo=UTC)),
        ("2026-11-30T12:00:00", datetime(2026, 11, 30, 12, tzinfo=UTC)),
        ("2026-11-30 12:00Z", datetime(2026, 11, 30, 12, tzinfo=UTC)),
        ("2026-11-30T12:00+01:00", datetime(2026, 11, 30, 11, tzinfo=UTC)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_parse_when(text: str, expected: datetime) -> None:
    got = parse_when(text, NOW)
    assert got == expected and got.tzinfo is not None and got.utcoffset() == timedelta(0)


def test_now_in_another_zone_is_counted_in_utc() -> None:
    late = datetime(2026, 12, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5)))  # 04:30 UTC Dec 2
    assert parse_when("today", late) == datetime(2026, 12, 2, tzinfo=UTC)


@pytest.mark.parametrize("text", ["", "soon", "now-1fortnight", "now-", "2026-13-01", "yesterdayish",
                                  "now-99999999999d"])
def test_bad_times_are_one_input_error(text: str) -> None:
    with pytest.raises(InputError):
        parse_when(text, NOW)


def test_parse_day() -> None:
    assert parse_day("yesterday", NOW) == date(2026, 11, 30)
    assert parse_day("now-1day", NOW) == date(2026, 11, 30)
    assert parse_day("2026-11-29", NOW) == date(2026, 11, 29)


def test_ledger_takes_relative_times(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_DB__URL", f"sqlite:///{tmp_path}/w.sqlite")
    assert CliRunner().invoke(app, ["db", "upgrade"]).exit_code == 0
    capture = Path(__file__).parent / "ledger" / "data" / "sacct_22.05_window.json"
    before = datetime.now(UTC)
    res = CliRunner().invoke(app, ["ledger", "reconcile", "--since", "now-1day", "--until", "now",
                                   "--file", str(capture), "--json"])
    assert res.exit_code in (0, 3), res.output
    got = json.loads(res.output)
    since, until = got["since"], got["until"]  # epoch seconds
    assert until - since == 86400 and abs(until - before.timestamp()) < 300
    res = CliRunner().invoke(app, ["ledger", "reconcile", "--since", "soon"])
    assert res.exit_code == 2 and "not a time" in res.output


def test_relative_day_leaves_iso_days_to_their_reader() -> None:
    assert relative_day("yesterday", NOW) == "2026-11-30"
    assert relative_day("today-7d", NOW) == "2026-11-24"
    assert relative_day("2026-13-01", NOW) == "2026-13-01"  # the report says what is wrong
    assert relative_day(None, NOW) is None
