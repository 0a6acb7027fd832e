"""Today's report so far (issue 36 item 1): the daemon rebuilds ``report.dir/<today>/`` every
``report.today_every_s``, over the window that ends now (open segments clipped at now, capacity
up to now, not to midnight), marked partial; the nightly run overwrites it with the whole day.
A partial report of yesterday does not count as the nightly one (the catch-up at start, the
``railgang_report_last_timestamp_seconds`` gauge)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine

from railgang.daemon.config import Settings
from railgang.daemon.report.nightly import run_nightly, run_today, schedule_nightly
from railgang.daemon.report.service import make_report, parse_day
from railgang.daemon.service.metrics import newest_report
from railgang.db.session import session_scope
from tests.daemon.api.dbs import fresh_engine
from tests.daemon.report.ledger_builder import DAY, T0, Ledger, at

D = T0 + 3 * DAY  # 2026-11-26 00:00 UTC
NOW = at(D + 6 * 3600 + 30 * 60)  # 06:30 that day


class FakeScheduler:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}

    def add_executor(self, _executor: object, _alias: str) -> None:
        pass

    def add_job(self, _fn: object, trigger: str, **kw: Any) -> None:
        self.jobs[kw["id"]] = {"trigger": trigger, **kw}


def _settings(root: Path, **report: Any) -> Settings:
    return Settings.model_validate({"db": {"url": "sqlite://"},
                                    "report": {"dir": str(root), **report}})


@pytest.mark.parametrize(("every", "added"), [(None, 3600), (20, 20), (0, None)],
                         ids=["hourly-by-default", "site-setting", "off"])
def test_today_is_rebuilt_on_its_schedule(tmp_path: Path, every: int | None,
                                          added: int | None) -> None:
    settings = _settings(tmp_path, **({} if every is None else {"today_every_s": every}))
    sched = FakeScheduler()
    assert schedule_nightly(sched, create_engine("sqlite://"), settings, now=NOW)
    job = sched.jobs.get("today-report")
    if added is None:
        assert job is None
        return
    assert job is not None
    assert job["trigger"] == "interval" and job["seconds"] == added
    assert job["next_run_time"] == NOW  # at start: an operator sees today's at once
    assert job["executor"] == "report" and job["coalesce"] and job["max_instances"] == 1


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Engine]:
    with fresh_engine("sqlite", tmp_path) as e:
        led = Ledger(e).team("a", 8).rate("h100", "reserved", 2.0)
        led.node("n01", D - DAY).node("n02", D - DAY)
        # n01 all day long from midnight (still open at 06:30), n02 from 02:00 to 03:00
        led.job("a1", "a", gpus=8, submit=D, segments=[(D, None, 8, "n01")])
        led.job("a2", "a", gpus=8, submit=D, segments=[(D + 2 * 3600, D + 3 * 3600, 8, "n02")])
        yield e


def test_a_window_that_ends_now_stops_at_now(ledger: Engine) -> None:
    with session_scope(ledger) as s:
        rep = make_report(s, parse_day("2026-11-26"), Settings().report, now=NOW)
    assert rep.partial and rep.until == int(NOW.timestamp())
    t = rep.totals
    assert t["capacity_gpu_h"] == 16 * 6.5  # two 8-GPU nodes up to 06:30, not to midnight
    assert t["allocated_gpu_h"] == 8 * 6.5 + 8  # the open segment clipped at now
    assert t["idle_gpu_h"] == 16 * 6.5 - (8 * 6.5 + 8)
    assert t["allocated_pct"] == round(100 * 60 / 104, 2)
    assert rep.teams[0].quota_gpu_h == 8 * 6.5  # the guarantee over the hours so far
    assert rep.series["t"][-1] < int(NOW.timestamp())  # no empty bins after now
    assert rep.trend is not None and rep.trend.days[-1] == "2026-11-26"  # today, not yesterday
    assert rep.trend.fleet_gpu_h[-1] == 60 and rep.trend.fleet_pct[-1] == round(100 * 60 / 104, 2)


def test_today_so_far_then_the_nightly_overwrites_it(ledger: Engine, tmp_path: Path) -> None:
    root = tmp_path / "reports"
    settings = _settings(root)
    out = run_today(ledger, settings, now=NOW)
    assert out == root / "2026-11-26"
    data = json.loads((out / "report.json").read_text())
    assert data["partial"] is True and data["until"] == int(NOW.timestamp())
    assert data["totals"]["allocated_gpu_h"] == 60
    assert "so far, until 06:30 UTC" in (out / "report.html").read_text()
    # written during its day: neither the nightly report nor what the gauge counts
    for path in (out / "report.json", out):  # as the daemon would have, at 06:30 that day
        os.utime(path, (NOW.timestamp(), NOW.timestamp()))
    assert newest_report(root) == 0.0
    sched = FakeScheduler()
    schedule_nightly(sched, ledger, settings, now=at(D + DAY + 1800))
    assert sched.jobs["nightly-report"]["next_run_time"] == at(D + DAY + 1800)  # caught up
    nightly = at(D + DAY + 3900)  # 01:05 the next day
    assert run_nightly(ledger, settings, now=nightly) == out
    data = json.loads((out / "report.json").read_text())
    assert data["partial"] is False and data["until"] == D + DAY
    assert data["totals"]["allocated_gpu_h"] == 8 * 24 + 8
    assert "so far" not in (out / "report.html").read_text()
    for path in (out / "report.json", out):
        os.utime(path, (nightly.timestamp(), nightly.timestamp()))
    assert newest_report(root) == nightly.timestamp()


def test_nothing_yet_today_is_no_failure(tmp_path: Path,
                                         caplog: pytest.LogCaptureFixture) -> None:
    with fresh_engine("sqlite", tmp_path) as e:
        Ledger(e).team("a", 8)
        with caplog.at_level("INFO", logger="railgang.report"):
            assert run_today(e, _settings(tmp_path / "r"), now=datetime(2026, 11, 26, 0, 0,
                                                                         tzinfo=UTC)) is None
    assert not (tmp_path / "r" / "2026-11-26").exists()
    assert any("today's report 2026-11-26" in r.getMessage() for r in caplog.records)
