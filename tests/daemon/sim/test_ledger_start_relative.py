"""``sim --ledger-start`` takes a relative day (daemon/when.py), as report --date does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.db.models import UsageRecord
from railgang.db.session import make_engine, session_scope


def test_ledger_start_today_minus_three_days(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration_s,account\na,0,8,3600,red\n")
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    want = (datetime.now(UTC) - timedelta(days=3)).date()
    res = CliRunner().invoke(app, ["sim", "--trace", str(trace), "--nodes", "1", "--leaf", "1",
                                   "-q", "--ledger", url, "--ledger-start", "today-3d",
                                   "--telemetry-interval-s", "600"])
    assert res.exit_code == 0, (res.output, res.exception)
    with session_scope(make_engine(url)) as s:
        first = s.execute(select(func.min(UsageRecord.start_epoch))).scalar_one()
    assert datetime.fromtimestamp(first, UTC).date() == want


def test_bad_ledger_start_names_the_flag(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration_s,account\na,0,8,3600,red\n")
    res = CliRunner().invoke(app, ["sim", "--trace", str(trace), "--nodes", "1", "--leaf", "1",
                                   "-q", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}",
                                   "--ledger-start", "now-1fortnight"])
    assert res.exit_code == 1 and "--ledger-start" in str(res.exception)
