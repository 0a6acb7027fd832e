"""Issue 38 row 4 and row 8 (serving): every serving reader the daemon and its API run is
bounded in size and in time, and none of them can stall the daemon's cycle.

- the demand and forecast files are read off the cycle's thread (``live.py``): a cycle waits at
  most ``READ_WAIT_S`` for a new reading and otherwise uses the last good one; only the
  configured deployments are parsed, at most ``DAEMON_MAX_ROWS`` rows each, from at most
  ``DAEMON_DEMAND_MAX_BYTES``, within ``READ_TIMEOUT_S``;
- the status file (``GET /v1/serving``, ``railgang serving status``) goes through the one bounded
  reader: a FIFO or a device is refused without blocking, nesting too deep and NaN are one line;
- a Prometheus answer is bounded in bytes, in series, in points per series and in time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from railgang.daemon.core import Node, make_snapshot
from railgang.daemon.serving import live as live_module
from railgang.daemon.serving import model
from railgang.daemon.serving.config import ServingSettings
from railgang.daemon.serving.live import LiveServing
from railgang.daemon.serving.model import (
    DAEMON_DEMAND_MAX_BYTES,
    DAEMON_MAX_ROWS,
    parse_demand,
    read_demand,
)
from railgang.daemon.serving.prometheus import MAX_POINTS, MAX_SERIES, parse_matrix, query_range
from railgang.daemon.serving.status import read_status
from railgang.errors import InputError, NotFoundError

GOOD = "time_s,deployment,replicas,tp,max_replicas\n0,chat,1,8,2\n0,code,1,2,2\n"
SNAP = make_snapshot(now=60.0, fabric=None, nodes=[Node(f"n{i:03d}", 8) for i in range(4)])


def _within(fn: Callable[[], Any], limit_s: float) -> tuple[bool, Any]:
    """(finished within ``limit_s``, its result or exception): a hang fails the test, not the run."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:  # the caller looks at what was raised
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    return (not thread.is_alive(), box[0] if box else None)


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, Path]:
    files = {
        "empty": b"",
        "binary": bytes(range(256)) * 64,
        "not-utf8": b"time_s,deployment,replicas,tp\n0,caf\xe9,1,8\n",
        "deep": b"[" * 100_000 + b"]" * 100_000,
    }
    out = {"/dev/zero": Path("/dev/zero"), "directory": tmp_path / "a-directory",
           "fifo": tmp_path / "fifo"}
    out["directory"].mkdir()
    os.mkfifo(out["fifo"])
    for name, data in files.items():
        out[name] = tmp_path / name
        out[name].write_bytes(data)
    return out


# -- the status file --------------------------------------------------------------------------

STATUS_KINDS = ["empty", "/dev/zero", "fifo", "directory", "binary", "not-utf8", "deep", "huge",
                "nan", "not-status"]


@pytest.mark.parametrize("kind", STATUS_KINDS)
def test_the_status_reader_refuses_hostile_files_at_once(kind: str, hostile: dict[str, Path],
                                                         tmp_path: Path) -> None:
    path = hostile.get(kind, tmp_path / kind)
    if kind == "huge":
        path.write_bytes(b'{"deployments": [], "pad": "' + b"x" * (5 * 2**20) + b'"}')
    elif kind == "nan":
        path.write_bytes(b'{"deployments": [], "as_of": NaN}')
    elif kind == "not-status":
        path.write_bytes(b"[1, 2]")
    done, got = _within(lambda: read_status(path), 5.0)
    assert done, f"read_status blocked on {kind}"
    assert isinstance(got, NotFoundError), got
    assert str(path) in str(got) and "\n" not in str(got)


def test_far_future_times_in_the_status_file_are_shown_not_a_traceback(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from railgang.daemon.cli.main import app

    status = tmp_path / "serving.json"
    status.write_text('{"as_of": 1e300, "deployments": [{"deployment": "chat", "tp": 8, '
                      '"lent": {"n001": 1e300, "n002": 253402300799, "n003": -1e300}}]}')
    env = {"RAILGANG_CONFIG": "", "RAILGANG_SERVING__STATUS_FILE": str(status)}
    res = CliRunner().invoke(app, ["serving", "status"], env=env)
    assert res.exit_code == 0, res.output
    assert "lent n001 until" in res.output and "lent n003 until" in res.output


# -- the demand file, as the daemon reads it ---------------------------------------------------

def _daemon_read(path: Path) -> Any:
    return read_demand(path, only={"chat"}, max_bytes=DAEMON_DEMAND_MAX_BYTES,
                       max_rows=DAEMON_MAX_ROWS, timeout_s=live_module.READ_TIMEOUT_S, whole=True)


@pytest.mark.parametrize("kind", ["empty", "/dev/zero", "fifo", "directory", "binary",
                                  "not-utf8", "deep", "huge", "rows", "nan", "future"])
def test_the_daemons_demand_reader_refuses_hostile_files(kind: str, hostile: dict[str, Path],
                                                         tmp_path: Path) -> None:
    path = hostile.get(kind, tmp_path / f"{kind}.csv")
    if kind == "huge":  # over the bound, but only just: refused before it is read
        path.write_bytes(b"time_s,deployment,replicas,tp\n" + b"0,x,1,8\n" * (
            DAEMON_DEMAND_MAX_BYTES // 8 + 1))
    elif kind == "rows":
        path.write_text("time_s,deployment,replicas,tp\n" + "".join(
            f"{t},chat,1,8\n" for t in range(DAEMON_MAX_ROWS + 1)))
    elif kind == "nan":
        path.write_text("time_s,deployment,replicas,tp\n0,chat,nan,8\ninf,chat,1,8\n")
    elif kind == "future":
        path.write_text("time_s,deployment,replicas,tp\n1e300,chat,1,8\n253402300799,chat,1,8\n")
    t0 = time.monotonic()
    done, got = _within(lambda: _daemon_read(path), 10.0)
    assert done, f"read_demand blocked on {kind}"
    assert isinstance(got, InputError), got
    assert str(path) in str(got) and "\n" not in str(got)
    if kind == "huge":
        assert time.monotonic() - t0 < 1.0, "a file over the bound is refused before it is read"


def test_only_the_configured_deployments_are_parsed(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    built: list[int] = []
    real = model._row

    def counted(cells: dict[str, str], line: int) -> Any:
        built.append(line)
        return real(cells, line)

    monkeypatch.setattr(model, "_row", counted)
    path = tmp_path / "d.csv"
    path.write_text("time_s,deployment,replicas,tp\n" + "".join(
        f"{t},d{t % 50},1,8\n" for t in range(5000)) + "0,chat,1,8\n60,chat,2,8\n0,d1,x,8\n")
    got = read_demand(path, only={"chat"})
    assert [d.name for d in got.deployments] == ["chat"]
    assert got.demand["chat"].points == ((0.0, 1), (60.0, 2))
    assert len(built) == 2 and not got.problems  # the bad row of d1 is not even looked at
    assert "d1" in got.others and len(got.others) <= model.MAX_OTHERS


def test_a_parse_past_its_time_bound_stops_itself() -> None:
    lines = ["time_s,deployment,replicas,tp\n"] + [f"{t},chat,1,8\n" for t in range(5000)]
    with pytest.raises(InputError, match="not read within 0 s"):
        parse_demand(lines, path="d.csv", only={"chat"}, timeout_s=0.0)


# -- the demand file under a running daemon ----------------------------------------------------

@pytest.fixture
def demand(tmp_path: Path) -> Path:
    path = tmp_path / "demand.csv"
    path.write_text(GOOD)
    return path


def _live(path: Path) -> LiveServing:
    return LiveServing(ServingSettings(enabled=True, demand_file=path,
                                       pools={"chat": "n[000-001]"}), 0.0)


def _cycles(live: LiveServing, count: int, limit_s: float) -> float:
    """Run ``count`` serving steps a little apart; the heartbeat's worst age (the longest gap
    between two step ends), or a failure when one step does not end within ``limit_s``."""
    worst, last = 0.0, time.monotonic()
    for _ in range(count):
        done, got = _within(lambda: live.step(SNAP), limit_s)
        assert done, f"a serving step took over {limit_s} s"
        assert not isinstance(got, BaseException), got
        now = time.monotonic()
        worst, last = max(worst, now - last), now
        time.sleep(0.2)
    return worst


def test_a_100mb_demand_file_does_not_stall_the_cycle(demand: Path, tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    live = _live(demand)
    live.step(SNAP)
    big = tmp_path / "big.csv"
    block = b"".join(b"%d,d%d,%d,8\n" % (t, t % 100, t % 7) for t in range(10_000))
    with big.open("wb") as fh:
        fh.write(b"time_s,deployment,replicas,tp\n")
        for _ in range(100 * 10**6 // len(block) + 1):
            fh.write(block)
    os.replace(big, demand)
    with caplog.at_level(logging.WARNING, "railgang.daemon.serving.live"):
        worst = _cycles(live, 6, 2.0)
    assert worst < 2.0, f"heartbeat {worst:.1f} s old"
    assert live.outlooks(60.0)["chat"].demand_now == 1  # the last good reading
    warned = [r.getMessage() for r in caplog.records if str(demand) in r.getMessage()]
    assert len(warned) == 1 and "larger than" in warned[0], warned


def test_a_big_file_within_the_bound_is_read_beside_the_cycle(demand: Path, tmp_path: Path) -> None:
    """15 MB (1.1 million rows, 1% of them the pool's): read in the background, the cycle never
    waits long for it. Read line by line, the reader thread starved the cycle's (the GIL's convoy
    effect): 1.1 and 2.1 s cycles."""
    live = _live(demand)
    big = tmp_path / "big.csv"
    block = b"".join(b"%d,chat,2,8\n" % t if t % 100 == 0 else b"%d,d%d,1,8\n" % (t, t % 100)
                     for t in range(10_000))
    with big.open("wb") as fh:
        fh.write(b"time_s,deployment,replicas,tp\n")
        for _ in range(15 * 10**6 // len(block)):
            fh.write(block)
    os.replace(big, demand)
    longest, t0 = 0.0, time.monotonic()
    while len(live.demand.value.others) < 32 and time.monotonic() - t0 < 30:  # until it lands
        start = time.monotonic()
        assert _within(lambda: live.step(SNAP), 3.0)[0]
        longest = max(longest, time.monotonic() - start)
    assert longest < 0.5 + 0.3, f"a cycle took {longest:.2f} s"  # READ_WAIT_S and the step
    assert live.outlooks(60.0)["chat"].demand_now == 2 and len(live.demand.value.others) == 32


def test_a_slow_read_runs_beside_the_cycle_and_lands_later(
        demand: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    live = _live(demand)
    real = model.read_demand
    slow = threading.Event()

    def reader(path: Path, **kw: Any) -> Any:
        if slow.is_set():
            time.sleep(2.0)
        return real(path, **kw)

    monkeypatch.setattr(live_module, "read_demand", reader)
    slow.set()
    demand.write_text(GOOD.replace("0,chat,1,8,2", "0,chat,2,8,2"))
    t0 = time.monotonic()
    assert _within(lambda: live.outlooks(60.0), 1.5)[0], "the cycle waited for the slow read"
    assert time.monotonic() - t0 < 1.5
    assert live.outlooks(60.0)["chat"].demand_now == 1  # not read yet: the last reading
    time.sleep(2.5)
    assert live.outlooks(60.0)["chat"].demand_now == 2  # read now


def test_a_read_stuck_past_its_bound_is_one_warning(demand: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    live = _live(demand)
    release = threading.Event()
    monkeypatch.setattr(live_module, "READ_TIMEOUT_S", 0.3)
    monkeypatch.setattr(live_module, "read_demand", lambda path, **kw: release.wait(30))
    demand.write_text(GOOD + "60,chat,2,8,2\n")
    with caplog.at_level(logging.WARNING, "railgang.daemon.serving.live"):
        for _ in range(6):
            assert _within(lambda: live.outlooks(60.0), 1.0)[0]
            time.sleep(0.2)
    release.set()
    warned = [r.getMessage() for r in caplog.records if str(demand) in r.getMessage()]
    assert len(warned) == 1 and "0.3 s" in warned[0], warned


def test_a_file_without_a_configured_deployment_keeps_the_last_reading(
        demand: Path, caplog: pytest.LogCaptureFixture) -> None:
    live = _live(demand)
    demand.write_text("time_s,deployment,replicas,tp\n0,code,1,8\n")
    with caplog.at_level(logging.WARNING, "railgang.daemon.serving.live"):
        _cycles(live, 2, 2.0)
    assert live.outlooks(60.0)["chat"].demand_now == 1  # not 0: the pool is not lent out
    warned = [r.getMessage() for r in caplog.records if str(demand) in r.getMessage()]
    assert len(warned) == 1 and "no rows of chat" in warned[0], warned


def test_a_removed_file_is_one_warning_and_a_missing_one_one_error(
        demand: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    live = _live(demand)
    demand.unlink()
    with caplog.at_level(logging.WARNING, "railgang.daemon.serving.live"):
        _cycles(live, 4, 2.0)
    assert live.outlooks(60.0)["chat"].demand_now == 1
    warned = [r.getMessage() for r in caplog.records if str(demand) in r.getMessage()]
    assert len(warned) == 1 and "file not found" in warned[0], warned
    with pytest.raises(InputError, match="file not found"):
        _live(tmp_path / "nowhere.csv")


# -- Prometheus ---------------------------------------------------------------------------------

def _matrix(series: int, points: int) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"deployment": f"d{i}"}, "values": [[float(t), "1"] for t in range(points)]}
        for i in range(series)]}}


def test_prometheus_series_and_points_are_capped() -> None:
    assert len(parse_matrix(_matrix(MAX_SERIES, 3), 0.0, "deployment").series) == MAX_SERIES
    with pytest.raises(InputError, match="series"):
        parse_matrix(_matrix(MAX_SERIES + 1, 3), 0.0, "deployment")
    with pytest.raises(InputError, match="points"):
        parse_matrix(_matrix(1, MAX_POINTS + 2), 0.0, "deployment")


@pytest.fixture
def dripping() -> Iterator[str]:
    """A Prometheus that promises 10 kB and sends a byte every 0.1 s."""

    class Drip(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "10000")
            self.end_headers()
            try:
                for _ in range(10000):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            except OSError:
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)  # a hung handler never blocks the teardown
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_slow_prometheus_answer_is_abandoned(dripping: str) -> None:
    t0 = time.monotonic()
    done, got = _within(lambda: query_range(dripping, "q", 0.0, 3600.0, 60.0, timeout_s=1.0), 6.0)
    assert done and isinstance(got, InputError), got
    assert "1 s" in str(got) and time.monotonic() - t0 < 3.0
