"""Issue 18 row 6: the API authenticates before it reads a body, bodies are bounded as they stream
(``api.max_body_bytes``), and hostile bodies (huge, deep, NaN/Infinity, not UTF-8, wrong types)
are 4xx with a message, never 5xx. The memory test runs the real ``railgang api`` (uvicorn) in a
child process and reads its peak RSS."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from railgang.daemon.api.app import create_app
from railgang.daemon.config import load_settings
from railgang.db.repositories import tokens
from railgang.db.session import session_scope
from tests.daemon.api.conftest import Api
from tests.daemon.api.dbs import fresh_url

MiB = 2**20
RAILGANG = str(Path(sys.executable).with_name("railgang"))
SMALL_BODY = {"kind": "borrow", "account": "team-a", "gpus": 1}


def _error(res: Any, status: int, code: str) -> dict[str, Any]:
    assert res.status_code == status, res.text[:500]
    body = res.json()["error"]
    assert body["code"] == code and body["message"], body
    return dict(body)


def _chunks(total: int, size: int = 64 * 1024) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield b" " * min(size, total - sent)
        sent += size


# -- in-process: the order of the checks and the answers ----------------------------------------


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
def test_no_token_is_refused_before_the_body(api: Api) -> None:
    # a body FastAPI would parse (and answer 422) is not read: 401 (that it stays unread on a
    # real socket: test_a_32mb_body_leaves_the_server_memory_bounded)
    res = api.client.post("/v1/quota-events", content=b'{"kind": 1}' + b" " * (MiB // 2),
                          headers={"Content-Type": "application/json"})
    _error(res, 401, "unauthenticated")
    assert res.headers["www-authenticate"] == "Bearer"
    bad = api.client.post("/v1/quota-events", content=b"{}", headers={
        "Authorization": "Bearer rg_not-a-token", "Content-Type": "application/json"})
    _error(bad, 401, "unauthenticated")


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
@pytest.mark.parametrize("how", ["content-length", "chunked", "lying-content-length"])
def test_over_limit_body_with_a_valid_token_is_413(api: Api, how: str) -> None:
    headers = {**api.admin, "Content-Type": "application/json"}
    if how == "content-length":
        res = api.client.post("/v1/quota-events", content=b" " * (2 * MiB), headers=headers)
    elif how == "chunked":
        res = api.client.post("/v1/quota-events", content=_chunks(2 * MiB), headers=headers)
    else:  # declares 100 bytes, streams 2 MiB: the count, not the header, decides
        res = api.client.post("/v1/quota-events", content=_chunks(2 * MiB),
                              headers={**headers, "Content-Length": "100"})
    body = _error(res, 413, "payload_too_large")
    assert "api.max_body_bytes" in body["message"]


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
def test_a_body_under_the_limit_passes(api: Api) -> None:
    res = api.client.post("/v1/quota-events", json=SMALL_BODY, headers=api.admin)
    assert res.status_code == 201, res.text


def test_the_limit_is_configurable(tmp_path: Path) -> None:
    with fresh_url("sqlite", tmp_path) as url:
        settings = load_settings(db={"url": url}, api={"max_body_bytes": 2048})
        assert load_settings().api.max_body_bytes == MiB  # the default
        with TestClient(create_app(settings)) as client:
            engine = client.app.state.engine  # type: ignore[attr-defined]
            with session_scope(engine) as s:
                _, secret = tokens.create(s, actor="t", name="r", role="admin", teams=[],
                                          expires_at=None)
            auth = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
            _error(client.post("/v1/quota-events", content=b" " * 3000, headers=auth), 413,
                   "payload_too_large")
            res = client.post("/v1/quota-events", content=b" " * 1000 + json.dumps(
                {**SMALL_BODY, "account": "nobody"}).encode(), headers=auth)
            assert res.status_code == 404, res.text  # parsed: the account does not exist


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
def test_gets_need_no_body_check(api: Api) -> None:
    assert api.client.get("/healthz").status_code == 200
    assert api.client.get("/v1/accounts", headers=api.team_a).status_code == 200


# -- hostile bodies against every operation that takes one --------------------------------------


def _body_operations() -> list[tuple[str, str]]:
    spec = create_app(load_settings(db={"url": "sqlite://"})).openapi()
    return sorted((method.upper(), path) for path, item in spec["paths"].items()
                  for method, op in item.items() if "requestBody" in op)


HOSTILE_BODIES: dict[str, bytes] = {
    "deep-nesting": b"[" * 100_000 + b"]" * 100_000,
    "deep-object": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "nan": b'{"per_gpu_hour": NaN, "gpus": NaN, "guaranteed_gpus": NaN}',
    "infinity": b'{"per_gpu_hour": Infinity, "gpus": Infinity, "guaranteed_gpus": -Infinity}',
    "huge-number": b'{"per_gpu_hour": 1e400, "gpus": 1' + b"0" * 5000 + b"}",
    "not-utf8": b'{"name": "\xff\xfe\xc3\x28", "kind": "borrow"}',
    "nul": b'{"name": "a\x00b"}',
    "wrong-types": b'{"kind": 1, "account": [], "gpus": "many", "name": {}, "role": null}',
    "not-an-object": b"[1, 2, 3]",
    "truncated": b'{"kind": "borr',
    "empty": b"",
    "long-strings": json.dumps({k: "x" * 600_000 for k in ("name", "detail")}).encode(),
}


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
@pytest.mark.parametrize("kind", list(HOSTILE_BODIES))
@pytest.mark.parametrize(("method", "path"), _body_operations(), ids=lambda v: str(v))
def test_hostile_bodies_are_4xx(api: Api, method: str, path: str, kind: str) -> None:
    concrete = (path.replace("{name}", "team-a").replace("{account}", "team-a")
                .replace("{gpu_type}", "h200").replace("{capacity}", "spot")
                .replace("{class_id}", "1").replace("{event_id}", "1"))
    res = api.client.request(method, concrete, content=HOSTILE_BODIES[kind],
                             headers={**api.admin, "Content-Type": "application/json"})
    assert 400 <= res.status_code < 500, f"{method} {concrete} {kind}: {res.text[:300]}"
    error = res.json()["error"]
    assert error["message"] and error["code"] != "internal", error


# -- a real server: memory stays bounded ---------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss(pid: int) -> int:
    """VmHWM: the process' peak resident set, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _send(port: int, headers: dict[str, str], body: Iterator[bytes]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest("POST", "/v1/quota-events")
        for k, v in headers.items():
            conn.putheader(k, v)
        conn.endheaders()
        try:
            for chunk in body:
                conn.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed: what we want
        return conn.getresponse().status
    finally:
        conn.close()


def test_a_32mb_body_leaves_the_server_memory_bounded(tmp_path: Path) -> None:
    with fresh_url("sqlite", tmp_path) as url:
        from railgang.db.session import make_engine

        engine = make_engine(url)
        with session_scope(engine) as s:
            _, secret = tokens.create(s, actor="t", name="r", role="admin", teams=[],
                                      expires_at=None)
        engine.dispose()
        port = _free_port()
        env = {**os.environ, "RAILGANG_DB__URL": url}
        env.pop("RAILGANG_CONFIG", None)
        log = tmp_path / "api.log"
        with log.open("wb") as out:
            server = subprocess.Popen([RAILGANG, "api", "--port", str(port), "--log-level",
                                       "error"], env=env, stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    assert server.poll() is None, log.read_text()[-2000:]
                    assert time.monotonic() < deadline, "the API did not start"
                    time.sleep(0.2)
            json_type = {"Content-Type": "application/json"}
            # warm up every path once, so the peak below is what the bodies cost
            assert _send(port, {**json_type, "Content-Length": "2"}, iter([b"{}"])) == 401
            before = _peak_rss(server.pid)
            total = 32 * MiB
            answers = [
                _send(port, {**json_type, "Content-Length": str(total)}, _chunks(total)),
                _send(port, {**json_type, "Transfer-Encoding": "chunked"},
                      (b"%x\r\n%s\r\n" % (len(c), c) for c in _chunks(total))),
                _send(port, {**json_type, "Authorization": f"Bearer {secret}",
                             "Transfer-Encoding": "chunked"},
                      (b"%x\r\n%s\r\n" % (len(c), c) for c in _chunks(total))),
            ]
            grown = _peak_rss(server.pid) - before
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert answers == [413, 401, 413]
    print(f"peak RSS {before / MiB:.0f} MiB before the 32 MB bodies, +{grown / MiB:.1f} MiB after")
    assert grown < 16 * MiB, f"the server grew {grown / MiB:.0f} MiB for bodies it refused"


# -- issue 18 row 14: a date the report cannot cover is 422, not 500 ----------------------------


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
@pytest.mark.parametrize("day", ["9999-12-31", "9999-01-01", "1970-01-01", "0001-01-01",
                                 "2026-02-30", "99999-01-01", "2026-1-1"])
def test_report_dates_out_of_range_are_422(api: Api, day: str) -> None:
    res = api.client.get(f"/v1/reports/{day}", headers=api.admin)
    assert "date" in _error(res, 422, "validation_failed")["fields"]


# -- issue 18 row 11: a team cannot pause its own use-it-or-lose-it review -----------------------


@pytest.mark.parametrize("db_kind", ["sqlite"], indirect=True)
def test_team_admin_cannot_post_a_lose_proposal(api: Api) -> None:
    body = {"kind": "lose-proposal", "account": "team-a", "gpus": 32}
    res = api.client.post("/v1/quota-events", json=body, headers=api.team_a_admin)
    assert "admin" in _error(res, 403, "forbidden")["message"]
    with session_scope(api.engine) as s:
        from railgang.db.org import QuotaEvent

        assert s.query(QuotaEvent).count() == 0  # nothing recorded that could pause the review
    for kind in ("borrow", "reclaim", "restore"):  # what a team-admin may still do
        ok = api.client.post("/v1/quota-events", json={**body, "kind": kind},
                             headers=api.team_a_admin)
        assert ok.status_code == 201, ok.text
    assert api.client.post("/v1/quota-events", json=body, headers=api.admin).status_code == 201
