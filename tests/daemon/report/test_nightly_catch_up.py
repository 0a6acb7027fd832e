"""A daemon that was down (or not yet installed) at the nightly hour builds yesterday's missing
report at start, not a day late (issue 36 item 1); one that finds it written waits for the hour."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from railgang.daemon.config import Settings
from railgang.daemon.report.nightly import schedule_nightly

NOW = datetime(2026, 11, 27, 14, 0, tzinfo=UTC)


class FakeScheduler:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}

    def add_executor(self, _executor: object, _alias: str) -> None:
        pass

    def add_job(self, _fn: object, _trigger: str, **kw: Any) -> None:
        self.jobs[kw["id"]] = kw


@pytest.mark.parametrize(("written", "first_run"), [(False, NOW), (True, None)],
                         ids=["missing-runs-now", "written-waits"])
def test_missing_report_is_built_at_start(tmp_path: Path, written: bool,
                                          first_run: datetime | None) -> None:
    if written:
        (tmp_path / "2026-11-26").mkdir()
        (tmp_path / "2026-11-26" / "report.json").write_text("{}")
    settings = Settings.model_validate({"db": {"url": "sqlite://"},
                                        "report": {"dir": str(tmp_path)}})
    sched = FakeScheduler()
    assert schedule_nightly(sched, create_engine("sqlite://"), settings, now=NOW)
    job = sched.jobs["nightly-report"]
    assert job.get("next_run_time") == first_run
    assert job["hour"] == 1 and job["minute"] == 5  # and every night after
