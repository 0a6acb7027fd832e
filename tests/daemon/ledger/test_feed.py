"""The daemon's ledger feeds (issue 36 item 1): sacct ingest and DCGM telemetry from Prometheus
on a schedule, exactly once, and hostile edges (Slurm or Prometheus unreachable, garbage
answers) that are one warning and a counted error, never an exception out of the run."""

from __future__ import annotations

import http.server
import json
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, func, select

from railgang.daemon.config import LedgerSettings, Settings
from railgang.daemon.ledger.feed import (
    SacctFeed,
    TelemetryFeed,
    samples_from_matrix,
    schedule_feeds,
    telemetry_query,
)
from railgang.daemon.service.metrics import DaemonMetrics
from railgang.db.ledger import GpuSample
from railgang.db.models import UsageRecord
from railgang.db.session import session_scope
from railgang.errors import SlurmCommandError
from tests.daemon.api.dbs import fresh_engine
from tests.daemon.ledger.builders import T0, Piece, SJob, window_view

NOW = datetime.fromtimestamp(T0 + 3 * 3600, UTC)
JOBS = [SJob(1, "team-a", "requeue", (Piece(T0 + 60, T0 + 600, 8),)),
        SJob(2, "team-b", "resize", (Piece(T0 + 100, T0 + 900, 16), Piece(T0 + 900, None, 8)))]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with fresh_engine("sqlite", tmp_path) as e:
        yield e


class Recorder:
    def __init__(self) -> None:
        self.reads: list[tuple[str, bool, datetime | None]] = []

    def ledger_read(self, source: str, ok: bool, watermark: datetime | None) -> None:
        self.reads.append((source, ok, watermark))


class FakeScheduler:
    def __init__(self) -> None:
        self.executors: list[str] = []
        self.jobs: dict[str, dict[str, Any]] = {}

    def add_executor(self, _executor: object, alias: str) -> None:
        self.executors.append(alias)

    def add_job(self, fn: object, trigger: str, **kw: Any) -> None:
        self.jobs[kw["id"]] = {"trigger": trigger, **kw}


def _sacct(since: datetime, until: datetime) -> str:
    return window_view(JOBS, int(since.timestamp()), int(until.timestamp()),
                       now=int(NOW.timestamp()))


# -- the schedule's settings ------------------------------------------------------------------

@pytest.mark.parametrize(("env", "fetch", "want"), [
    ({}, True, {"ledger-ingest": 300}),
    ({}, False, {}),  # sim/fake backend: no sacct
    ({"RAILGANG_LEDGER__INGEST_EVERY_S": "0"}, True, {}),
    ({"RAILGANG_LEDGER__INGEST_EVERY_S": "60",
      "RAILGANG_LEDGER__TELEMETRY_PROMETHEUS_URL": "http://prom:9090",
      "RAILGANG_LEDGER__TELEMETRY_EVERY_S": "120"}, True,
     {"ledger-ingest": 60, "ledger-telemetry": 120}),
    ({"RAILGANG_LEDGER__TELEMETRY_PROMETHEUS_URL": "https://prom.example"}, False,
     {"ledger-telemetry": 300}),
], ids=["default", "no-sacct", "ingest-off", "both", "telemetry-only"])
def test_schedule_follows_the_settings(monkeypatch: pytest.MonkeyPatch, engine: Engine,
                                       env: dict[str, str], fetch: bool,
                                       want: dict[str, int]) -> None:
    monkeypatch.setenv("RAILGANG_CONFIG", "")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    sched = FakeScheduler()
    ids = schedule_feeds(sched, engine, Settings(), None, _sacct if fetch else None)
    assert ids == list(want)
    assert {k: v["seconds"] for k, v in sched.jobs.items()} == want
    for job in sched.jobs.values():  # own executor, never stacked, first run at start
        assert job["trigger"] == "interval" and job["executor"] == "ledger"
        assert job["coalesce"] is True and job["max_instances"] == 1
        assert job["next_run_time"] is not None
    assert sched.executors == (["ledger"] if want else [])


@pytest.mark.parametrize("url", ["ftp://prom", "prom:9090", "http://"])
def test_telemetry_url_must_be_http(url: str) -> None:
    with pytest.raises(ValidationError):
        LedgerSettings(telemetry_prometheus_url=url)


# -- sacct --------------------------------------------------------------------------------------

def _rows(engine: Engine) -> int:
    with session_scope(engine) as s:
        return int(s.scalar(select(func.count()).select_from(UsageRecord)) or 0)


def test_sacct_feed_ingests_from_the_watermark_exactly_once(engine: Engine) -> None:
    cfg = LedgerSettings(first_lookback_s=4 * 3600)
    rec = Recorder()
    feed = SacctFeed(engine, _sacct, cfg, rec, now=lambda: NOW)
    assert feed.run() is not None
    first = _rows(engine)
    assert first == 3  # job 1, and job 2's two sizes
    assert feed.run() is not None  # again over the overlap: the same rows
    assert _rows(engine) == first
    assert [(src, ok) for src, ok, _ in rec.reads] == [("sacct", True), ("sacct", True)]
    assert rec.reads[-1][2] == NOW  # the watermark the metric shows


def test_sacct_unreachable_is_one_warning_and_a_counted_error(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    def down(_since: datetime, _until: datetime) -> str:
        raise SlurmCommandError(["sacct", "--json"], 1, "Slurm accounting storage is disabled")

    metrics = DaemonMetrics()
    with caplog.at_level(logging.WARNING, "railgang.ledger"):
        assert SacctFeed(engine, down, LedgerSettings(), metrics, now=lambda: NOW).run() is None
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "accounting storage is disabled" in warnings[0].getMessage()
    assert "\n" not in warnings[0].getMessage() and warnings[0].exc_info is None
    assert metrics.ledger_reads.labels("sacct", "error")._value.get() == 1
    assert metrics.ledger_mark.labels("sacct")._value.get() == 0


# -- telemetry from Prometheus ----------------------------------------------------------------

def _matrix(t0: float, n: int = 3) -> dict[str, Any]:
    def series(name: str, host: str, gpu: str, value: str) -> dict[str, Any]:
        return {"metric": {"__name__": name, "Hostname": host, "gpu": gpu, "job": "dcgm"},
                "values": [[t0 + 30 * i, value] for i in range(n)]}

    return {"status": "success", "data": {"resultType": "matrix", "result": [
        series("DCGM_FI_DEV_GPU_UTIL", "n01", "0", "80"),
        series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "n01", "0", "0.5"),  # wins: profiling metric
        series("DCGM_FI_DEV_FB_USED", "n01", "0", "30000"),
        series("DCGM_FI_DEV_POWER_USAGE", "n01", "0", "400"),
        series("DCGM_FI_DEV_GPU_UTIL", "n02", "7", "NaN"),  # skipped
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "1"}, "values": [[t0, "5"]]},
    ]}}


def test_samples_from_a_dcgm_matrix() -> None:
    samples, skipped = samples_from_matrix(_matrix(float(T0)))
    assert skipped == 4  # three NaN values and one series without a Hostname
    assert [(x.node, x.gpu, x.sm_util, x.mem_used_mib, x.power_w) for x in samples] == \
        [("n01", 0, 50.0, 30000.0, 400.0)] * 3
    assert [x.at_ms for x in samples] == [T0 * 1000, (T0 + 30) * 1000, (T0 + 60) * 1000]


def test_telemetry_query_names_the_series_and_the_site_selector() -> None:
    q = telemetry_query('job="dcgm"')
    assert q.startswith('{__name__=~"DCGM_FI_DEV_GPU_UTIL|') and q.endswith(', job="dcgm"}')
    assert "DCGM_FI_DEV_FB_USED" in q and "DCGM_FI_DEV_POWER_USAGE" in q


def test_telemetry_feed_stores_samples_and_moves_its_watermark(engine: Engine) -> None:
    asked: list[tuple[float, float]] = []

    def query(url: str, q: str, start: float, end: float, step: float) -> Any:
        asked.append((start, end))
        return _matrix(start)

    cfg = LedgerSettings(telemetry_prometheus_url="http://prom:9090", telemetry_every_s=300)
    rec = Recorder()
    feed = TelemetryFeed(engine, cfg, rec, query=query, now=lambda: NOW)
    assert feed.run() == 3
    assert feed.run() == 0  # nothing new since the watermark
    assert len(asked) == 1 and asked[0][1] == NOW.timestamp() - 60  # the scrape lag
    with session_scope(engine) as s:
        assert s.scalar(select(func.count()).select_from(GpuSample)) == 3
    assert rec.reads[-1] == ("telemetry", True, NOW - timedelta(seconds=60))


class _Garbage(http.server.BaseHTTPRequestHandler):
    body = b"<html>502 Bad Gateway</html>"

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def garbage_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("answer", [b"<html>502 Bad Gateway</html>",
                                    json.dumps({"status": "error", "error": "bad query"}).encode(),
                                    json.dumps({"status": "success", "data": {
                                        "resultType": "vector", "result": []}}).encode(),
                                    b'{"status": "success", "data": [' * 5000],
                         ids=["html", "error", "vector", "deep"])
def test_garbage_from_prometheus_is_one_warning(engine: Engine, garbage_server: str,
                                                answer: bytes,
                                                monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_Garbage, "body", answer)
    metrics = DaemonMetrics()
    cfg = LedgerSettings(telemetry_prometheus_url=garbage_server)
    with caplog.at_level(logging.WARNING, "railgang.ledger"):
        assert TelemetryFeed(engine, cfg, metrics).run() is None
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "Prometheus" in warnings[0].getMessage(), warnings
    assert warnings[0].exc_info is None and "\n" not in warnings[0].getMessage()
    assert metrics.ledger_reads.labels("telemetry", "error")._value.get() == 1


def test_unreachable_prometheus_is_one_warning(engine: Engine,
                                               caplog: pytest.LogCaptureFixture) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = LedgerSettings(telemetry_prometheus_url=f"http://127.0.0.1:{port}")
    with caplog.at_level(logging.WARNING, "railgang.ledger"):
        assert TelemetryFeed(engine, cfg).run() is None
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "refused" in warnings[0].getMessage().lower(), warnings
