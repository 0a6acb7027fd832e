"""``railgang api --log-format json``: every line the server writes (uvicorn's and the app's,
one worker or several) is one JSON object with ts, level, logger and msg."""

from __future__ import annotations

import json
import logging
import logging.config
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from railgang.daemon.service.logs import logging_config
from tests.daemon.api.dbs import fresh_url

RAILGANG = str(Path(sys.executable).with_name("railgang"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as res:
            return int(res.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("workers", [1, 2])
def test_every_line_is_json(tmp_path: Path, workers: int) -> None:
    with fresh_url("sqlite", tmp_path) as url:
        port = _free_port()
        env = {**os.environ, "RAILGANG_DB__URL": url}
        env.pop("RAILGANG_CONFIG", None)
        log = tmp_path / "api.log"
        with log.open("wb") as out:
            server = subprocess.Popen([RAILGANG, "api", "--port", str(port), "--log-format",
                                       "json", "--workers", str(workers)],
                                      env=env, stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if _get(port, "/healthz") == 200:
                        break
                except OSError:
                    pass
                assert server.poll() is None, log.read_text()[-2000:]
                assert time.monotonic() < deadline, "the API did not start"
                time.sleep(0.2)
            assert _get(port, "/no-such-page") == 404
        finally:
            server.terminate()
            server.wait(timeout=30)
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    assert lines, "the server logged nothing"
    records = [json.loads(ln) for ln in lines]  # a plain-text line fails here
    assert all({"ts", "level", "logger", "msg"} <= set(r) for r in records)
    assert any(r["logger"].startswith("uvicorn") for r in records)
    assert any("Uvicorn running" in r["msg"] or "Started server" in r["msg"] for r in records)


def test_logging_config_routes_uvicorn_through_the_formatter(capsys: pytest.CaptureFixture[str]) -> None:
    logging.config.dictConfig(logging_config("json", "info"))
    try:
        logging.getLogger("uvicorn.error").info("hello %s", "there")
        err = capsys.readouterr().err.strip().splitlines()
        assert json.loads(err[-1])["msg"] == "hello there"
    finally:
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False,
                                   "root": {"handlers": [], "level": "WARNING"}})
