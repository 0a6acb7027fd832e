"""``railgang serving fetch``: demand history from Prometheus' range query (a stub server on
loopback), written as a demand file the other commands read; hostile answers are one error."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.serving.cli import serving_app
from railgang.daemon.serving.model import read_demand
from railgang.daemon.serving.prometheus import parse_matrix
from railgang.errors import InputError

END = 1_800_000_000.0
START = END - 86400.0
GOOD = {"status": "success", "data": {"resultType": "matrix", "result": [
    {"metric": {"deployment": "chat"}, "values": [[START, "2"], [START + 900, "2.4"],
                                                  [START + 1800, "5"], [START + 2700, "NaN"]]},
    {"metric": {"deployment": "code"}, "values": [[START, "1"], [START + 900, "-3"]]},
    {"metric": {"job": "x"}, "values": [[START, "1"]]},
]}}


@pytest.fixture
def prometheus() -> Iterator[tuple[str, list[object]]]:
    answers: list[object] = []

    class Stub(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers.pop(0) if answers else GOOD
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answers
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_writes_a_demand_file(prometheus: tuple[str, list[object]], tmp_path: Path) -> None:
    url, _ = prometheus
    out = tmp_path / "demand.csv"
    res = CliRunner().invoke(serving_app, ["fetch", url, "--query", "replicas_needed", "--out",
                                           str(out), "--days", "1", "--end", str(END),
                                           "--tp", "chat=8", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["deployments"] == ["chat", "code"]
    assert "skipped 3 samples" in res.stderr  # NaN, -3, and the series without the label
    got = read_demand(out)
    assert got.demand["chat"].points == ((0.0, 2), (1800.0, 5))
    assert {d.name: d.tp for d in got.deployments} == {"chat": 8, "code": 1}


@pytest.mark.parametrize("answer", [
    b"not json", b"[" * 100_000, {"status": "error", "error": "bad query"},
    {"status": "success", "data": {"resultType": "vector", "result": []}},
    {"status": "success", "data": {"resultType": "matrix", "result": "x"}}, [], None,
], ids=["text", "deep", "error", "vector", "result-not-list", "list", "null"])
def test_hostile_answers_are_one_error(prometheus: tuple[str, list[object]], tmp_path: Path,
                                       answer: object) -> None:
    url, answers = prometheus
    answers.append(answer)
    res = CliRunner().invoke(serving_app, ["fetch", url, "--query", "q", "--out",
                                           str(tmp_path / "d.csv"), "--end", str(END)])
    assert res.exit_code != 0
    assert isinstance(res.exception, (InputError, SystemExit)) or "error" in res.output.lower()
    assert not (tmp_path / "d.csv").exists()


def test_bad_urls_and_specs_are_refused(tmp_path: Path) -> None:
    for args in (["file:///etc/passwd"], ["http://127.0.0.1:9", "--tp", "x=0"],
                 ["http://127.0.0.1:9", "--step-s", "60", "--days", "30"]):
        res = CliRunner().invoke(serving_app, ["fetch", *args[:1], "--query", "q", "--out",
                                               str(tmp_path / "d.csv"), *args[1:]])
        assert res.exit_code != 0, args


def test_parse_matrix_skips_bad_pairs() -> None:
    got = parse_matrix({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"deployment": "a"}, "values": [[1, "1"], ["x", "2"], [3], None, [5, "inf"]]},
    ]}}, 0.0, "deployment")
    assert got.series == {"a": [(1.0, 1)]} and got.skipped == 4
