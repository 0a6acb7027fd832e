"""The simulated week's report in headless Chromium (Debian's chromium): no console errors,
every chart decoded and drawn, every table filled; the screenshot is kept as an artifact."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.service import parse_day, write_day
from railgang.db.session import make_engine, session_scope
from tests.daemon.report.browser import chromium_path, open_page
from tests.daemon.report.conftest import SimWeek, artifact_dir

pytestmark = pytest.mark.slow

CHECK = """(() => {
  const imgs = [...document.images];
  const tables = [...document.querySelectorAll('table')];
  return {
    images: imgs.length,
    drawn: imgs.filter(i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100).length,
    charts: ['fleet', 'power', 'trend', 'teams', 'pools', 'queue'].filter(
        id => document.getElementById('chart-' + id)).length,
    tables: Object.fromEntries(tables.map(t => [t.id, t.rows.length])),
    scripts: document.scripts.length,
    // anomalies come first, before any chart
    anomaliesFirst: !!document.getElementById('anomalies') &&
        !!(document.getElementById('anomalies').compareDocumentPosition(
            document.getElementById('chart-fleet')) & Node.DOCUMENT_POSITION_FOLLOWING),
    allocated: (document.getElementById('kpi-allocated') || {}).textContent || '',
    height: document.body.scrollHeight,
  };
})()"""


@pytest.fixture(scope="module")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        pytest.fail("chromium is not installed: apt-get install chromium (.ci/run installs it; "
                    "this test must not be skipped)")
    return path


def test_week_report_renders_in_chromium(sim_week: SimWeek, chromium: str) -> None:
    out = artifact_dir() / "sim-week-2026-11-26"
    engine = make_engine(sim_week.url)
    with session_scope(engine) as s:
        rep, _ = write_day(s, parse_day("2026-11-26"), ReportSettings(), out,
                           now=datetime(2026, 12, 31, tzinfo=UTC))
    engine.dispose()
    shot = artifact_dir() / "sim-week-2026-11-26.png"
    page = open_page((out / "report.html").as_uri(), check_js=CHECK, screenshot=shot)
    print(f"\nreport screenshot: {shot}\nreport: {out / 'report.html'}")
    assert page.errors == [], page.errors
    c = page.check
    assert c["images"] == c["drawn"] == c["charts"] == 6, c
    assert c["scripts"] == 0  # readable without JavaScript
    assert c["anomaliesFirst"] and f"{rep.totals['allocated_pct']:,.1f} % of capacity" in \
        c["allocated"]
    rows = c["tables"]
    assert rows["table-teams"] == 2 + len(rep.teams) and rows["table-jobs"] == 21
    assert rows["table-users"] == 1 + len(rep.users) > 1
    assert rows["table-waits"] == 1 + len(rep.team_waits) > 1
    assert rows["table-trend"] == 3 + len(rep.teams)
    assert rows["table-pools"] == 2 and rows["table-queue"] == 5 and rows["table-chaos"] == 2
    assert rows["table-anomalies"] == 1 + len(rep.anomaly_groups) > 1  # grouped (issue 36)
    assert shot.stat().st_size > 50_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_week_range_renders_in_chromium(sim_week: SimWeek, chromium: str) -> None:
    """``--from 2026-11-23 --to 2026-11-29``: the whole simulated week as one report."""
    from railgang.daemon.report.service import parse_range

    out = artifact_dir() / "sim-week-range"
    engine = make_engine(sim_week.url)
    with session_scope(engine) as s:
        rep, _ = write_day(s, parse_range("2026-11-23", "2026-11-29"), ReportSettings(), out,
                           now=datetime(2026, 12, 31, tzinfo=UTC))
    engine.dispose()
    page = open_page((out / "report.html").as_uri(), check_js=CHECK,
                     screenshot=artifact_dir() / "sim-week-range.png")
    assert page.errors == [], page.errors
    assert page.check["images"] == page.check["drawn"] == 6, page.check
    assert rep.date == "2026-11-23..2026-11-29" and rep.totals["capacity_gpu_h"] == 32 * 168
    assert rep.trend is not None and sum(rep.trend.fleet_gpu_h) == pytest.approx(
        rep.totals["allocated_gpu_h"], abs=0.05)  # the trend's 7 days are the range's


def test_an_empty_day_renders(tmp_path: Path, chromium: str) -> None:
    """Telemetry of idle GPUs and nothing else: every chart still drawn (saying so)."""
    from tests.daemon.report.ledger_builder import T0, Ledger

    url = f"sqlite:///{tmp_path / 'empty.sqlite'}"
    from railgang.db import migrate

    migrate.upgrade(url)
    engine = make_engine(url)
    Ledger(engine).samples("n01", 0, T0 + 3 * 86400, [0.0] * 30)
    with session_scope(engine) as s:
        write_day(s, parse_day("2026-11-26"), ReportSettings(), tmp_path / "out",
                  now=datetime(2026, 12, 31, tzinfo=UTC))
    engine.dispose()
    page = open_page((tmp_path / "out" / "report.html").as_uri(), check_js=CHECK)
    assert page.errors == [], page.errors
    assert page.check["images"] == page.check["drawn"] == 6, page.check


def test_the_check_catches_a_broken_page(tmp_path: Path, chromium: str) -> None:
    """The same check fails a page with a console error and a chart that does not decode."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><img id='chart-fleet' src='data:image/svg+xml;base64,AAAA'>"
                   "<script>console.error('boom')</script></body></html>")
    page = open_page(bad.as_uri(), check_js=CHECK)
    assert any("boom" in e for e in page.errors)
    assert page.check["images"] == 1 and page.check["drawn"] == 0
