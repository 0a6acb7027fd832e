"""``ledger ingest --until`` in the future (issue 18 row 7): refused in one line before any
window, so the watermark never passes now; a watermark already in the future is refused as a
default start and reset by the next ingest with an explicit ``--since``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.ledger.ingest import source_name
from railgang.db.ledger import LedgerWatermark
from railgang.db.session import make_engine, session_scope
from railgang.errors import InputError
from tests.daemon.ledger.builders import document, record

T_FMT = "%Y-%m-%dT%H:%M:%S"


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'future.sqlite'}"
    monkeypatch.setenv("RAILGANG_DB__URL", url)
    monkeypatch.setenv("RAILGANG_LEDGER__WINDOW_S", "86400")
    assert CliRunner().invoke(app, ["db", "upgrade"]).exit_code == 0
    return url


def mark(url: str) -> datetime | None:
    eng = make_engine(url)
    with session_scope(eng) as s:
        row = s.get(LedgerWatermark, source_name("railgang"))
        got = None if row is None else row.ingested_until
    eng.dispose()
    return got


def set_mark(url: str, when: datetime) -> None:
    eng = make_engine(url)
    with session_scope(eng) as s:
        s.add(LedgerWatermark(source=source_name("railgang"), ingested_until=when,
                              updated_at=when))
    eng.dispose()


def sacct_file(tmp_path: Path, now: datetime) -> Path:
    t = int(now.timestamp()) - 3600
    path = tmp_path / "sacct.json"
    path.write_text(document([record(1, "team-a", start=t, end=0, submission=t - 5, gpus=8,
                                     state="RUNNING")]))
    return path


def test_until_in_the_future_is_refused_and_the_watermark_stays(db: str, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    since, until = now - timedelta(days=2), now + timedelta(days=1)
    res = CliRunner().invoke(app, ["ledger", "ingest", "--since", since.strftime(T_FMT),
                                   "--until", until.strftime(T_FMT),
                                   "--file", str(sacct_file(tmp_path, now))])
    assert res.exit_code == 1 and isinstance(res.exception, InputError)
    assert "is in the future" in str(res.exception) and "\n" not in str(res.exception)
    assert mark(db) is None  # not even the windows before now were ingested


def test_until_now_or_earlier_still_moves_the_watermark(db: str, tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    until = now - timedelta(minutes=1)
    res = CliRunner().invoke(app, ["ledger", "ingest", "--since", (now - timedelta(hours=3)).strftime(T_FMT),
                                   "--until", until.strftime(T_FMT),
                                   "--file", str(sacct_file(tmp_path, now))])
    assert res.exit_code == 0, res.output
    assert mark(db) == until


def test_a_watermark_in_the_future_is_refused_then_reset_by_since(db: str, tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    set_mark(db, now + timedelta(days=30))  # what the bug left behind
    res = CliRunner().invoke(app, ["ledger", "ingest", "--file", str(sacct_file(tmp_path, now))])
    assert res.exit_code == 1 and "watermark" in str(res.exception)
    assert "--since" in str(res.exception)
    since = now - timedelta(hours=3)
    res = CliRunner().invoke(app, ["ledger", "ingest", "--since", since.strftime(T_FMT),
                                   "--file", str(sacct_file(tmp_path, now))])
    assert res.exit_code == 0, res.output
    repaired = mark(db)
    assert repaired is not None and now - timedelta(seconds=5) <= repaired <= datetime.now(UTC)
    res = CliRunner().invoke(app, ["ledger", "ingest", "--file", str(sacct_file(tmp_path, now))])
    assert res.exit_code == 0, res.output  # the default start works again
