"""``GET /v1/reports/{date}`` with the API's tokens and roles, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from railgang.daemon.api.app import create_app
from railgang.daemon.config import load_settings
from railgang.daemon.report.nightly import run_nightly, schedule_nightly
from railgang.db.repositories import tokens
from railgang.db.session import session_scope
from tests.daemon.report.ledger_builder import DAY, T0, Ledger

D3 = T0 + 3 * DAY


def headers(engine: Engine, name: str, role: str, teams: list[str]) -> dict[str, str]:
    with session_scope(engine) as s:
        _, secret = tokens.create(s, actor="test", name=name, role=role, teams=teams,
                                  expires_at=None)
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def client(engine: Engine, tmp_path: Path) -> Iterator[tuple[TestClient, Engine, Path]]:
    led = Ledger(engine).team("a", 8).team("b", 8).rate("h100", "reserved", 2.0)
    led.job("a1", "a", gpus=8, submit=D3, segments=[(D3, D3 + 7200, 8, "n01")])
    led.job("b1", "b", gpus=4, submit=D3, segments=[(D3, D3 + 3600, 4, "n02")])
    settings = load_settings(db={"url": "sqlite://"}, report={"dir": str(tmp_path / "nightly")})
    with TestClient(create_app(settings, engine=engine)) as c:
        yield c, engine, tmp_path


def test_admin_gets_html_json_and_csv(client) -> None:  # type: ignore[no-untyped-def]
    c, eng, _ = client
    h = headers(eng, "root", "admin", [])
    r = c.get("/v1/reports/2026-11-26", headers=h)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "<h1>GPU fleet utilisation — 2026-11-26</h1>" in r.text
    data = c.get("/v1/reports/2026-11-26?format=json", headers=h).json()
    assert [t["team"] for t in data["teams"]] == ["a", "b"]
    csv = c.get("/v1/reports/2026-11-26?format=csv&table=teams", headers=h)
    assert csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines()[1].startswith("a,dept,8,,192.0,16.0")


def test_team_token_sees_only_its_team(client) -> None:  # type: ignore[no-untyped-def]
    c, eng, _ = client
    h = headers(eng, "b-reader", "team-reader", ["b"])
    data = c.get("/v1/reports/2026-11-26?format=json", headers=h).json()
    assert [t["team"] for t in data["teams"]] == ["b"]
    assert [j["job"] for j in data["top_jobs"]] == ["b1"] and data["teams_scope"] == ["b"]
    html = c.get("/v1/reports/2026-11-26", headers=h).text
    assert ">b1<" in html and ">a1<" not in html and ">a<" not in html


def test_errors(client) -> None:  # type: ignore[no-untyped-def]
    c, eng, _ = client
    assert c.get("/v1/reports/2026-11-26").status_code == 401
    h = headers(eng, "root", "admin", [])
    bad = c.get("/v1/reports/2026-02-30", headers=h)
    assert bad.status_code == 422 and "not a calendar date" in bad.json()["error"]["fields"]["date"]
    none = c.get("/v1/reports/2025-01-01", headers=h)
    assert none.status_code == 404 and "2025-01-01" in none.json()["error"]["message"]
    assert c.get("/v1/reports/2026-11-26?format=pdf", headers=h).status_code == 422


def test_nightly_job_writes_and_the_api_serves_it(client) -> None:  # type: ignore[no-untyped-def]
    c, eng, tmp = client
    settings = load_settings(db={"url": "sqlite://"}, report={"dir": str(tmp / "nightly")})
    out = run_nightly(eng, settings, now=datetime(2026, 11, 27, 1, 5, tzinfo=UTC))
    assert out == tmp / "nightly" / "2026-11-26"
    stored = json.loads((out / "report.json").read_text())
    assert stored["date"] == "2026-11-26"
    # the admin is served the stored file (the marker proves it was not rebuilt)
    (out / "report.html").write_text("<html>stored</html>")
    h = headers(eng, "root", "admin", [])
    assert c.get("/v1/reports/2026-11-26", headers=h).text == "<html>stored</html>"
    # a day without data is skipped, not an error
    assert run_nightly(eng, settings, now=datetime(2025, 1, 2, tzinfo=UTC)) is None


def test_schedule_nightly_adds_a_cron_job_on_its_own_executor(engine: Engine,
                                                              tmp_path: Path) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler

    scheduler = BackgroundScheduler()
    assert not schedule_nightly(scheduler, engine, load_settings(db={"url": "sqlite://"}))
    settings = load_settings(db={"url": "sqlite://"}, report={"dir": str(tmp_path),
                                                              "nightly_hour_utc": 2})
    assert schedule_nightly(scheduler, engine, settings)
    job = scheduler.get_job("nightly-report")
    assert job.executor == "report" and "hour='2'" in str(job.trigger)
