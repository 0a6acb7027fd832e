"""The aggregation cache (daemon/api/cache.py) and the session slots (deps.get_session): an ended
window's answer is reused until the ledger's version moves; a window reaching past now never is;
a burst of requests larger than the connection pool is served, not hung for 30 s."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, update

from railgang.daemon.api.app import create_app
from railgang.daemon.api.cache import TtlCache
from railgang.daemon.config import load_settings
from railgang.db.models import UsageRecord
from railgang.db.session import session_scope
from tests.daemon.api.conftest import Api
from tests.daemon.api.test_usage import RATE, T, _q, priced  # noqa: F401 (fixture)


def _team_a(api: Api, query: str) -> dict[str, float]:
    res = api.client.get(f"/v1/chargeback?{query}&group_by=team", headers=api.admin)
    assert res.status_code == 200
    return next(r for r in res.json()["items"] if r["team"] == "team-a")


def _double_gpus(api: Api) -> None:  # a change no version column shows (no ingest, no audit)
    with session_scope(api.engine) as s:
        s.execute(update(UsageRecord).values(gpus=UsageRecord.gpus * 2))


def test_ended_window_is_reused_until_the_ledger_version_moves(priced: Api) -> None:  # noqa: F811
    first = _team_a(priced, _q(T, T + 22))
    assert first["gpu_seconds"] == 326
    _double_gpus(priced)
    assert _team_a(priced, _q(T, T + 22)) == first  # cached: nothing in the version moved
    res = priced.client.put("/v1/rates/gpu/reserved", headers=priced.admin,
                            json={"per_gpu_hour": 2 * RATE})  # an admin change: audit_log
    assert res.status_code == 200
    after = _team_a(priced, _q(T, T + 22))
    assert after["gpu_seconds"] == 2 * 326
    assert after["cost"] == round(2 * 326 / 3600 * 2 * RATE, 6)


def test_window_reaching_past_now_is_never_cached(priced: Api) -> None:  # noqa: F811
    future = _q(T, int(time.time()) + 86400)
    before = _team_a(priced, future)["gpu_seconds"]
    _double_gpus(priced)
    assert _team_a(priced, future)["gpu_seconds"] > before


def test_ttl_cache_expires_and_stays_bounded() -> None:
    cache = TtlCache(seconds=0.05, entries=2)
    calls: list[int] = []

    def compute(n: int) -> int:
        calls.append(n)
        return n

    assert [cache.get_or_compute(k, lambda k=k: compute(k)) for k in (1, 1, 2, 3, 1)] == [
        1, 1, 2, 3, 1]
    assert calls == [1, 2, 3, 1]  # the second 1 was a hit; the last, evicted by 2 and 3
    time.sleep(0.06)
    cache.get_or_compute(3, lambda: compute(3))
    assert calls[-1] == 3  # expired
    off = TtlCache(seconds=0, entries=8)
    off.get_or_compute(1, lambda: compute(9))
    off.get_or_compute(1, lambda: compute(9))
    assert calls[-2:] == [9, 9]


def test_a_burst_larger_than_the_pool_is_served(api: Api) -> None:
    """160 requests from 80 threads against a pool of 2 connections (3 s timeout) and 40 server
    threads: each request waits for one of 2 session slots in the event loop, so no thread
    blocks on the pool while the requests holding its connections wait for a thread (without
    the slots this burst answers 500s after the pool timeout; measured before the change)."""
    engine = create_engine(api.engine.url, pool_size=2, max_overflow=0, pool_timeout=3)
    app = create_app(load_settings(db={"url": "sqlite://"}, api={"db_sessions": 2}),
                     engine=engine)
    try:
        with TestClient(app) as client, ThreadPoolExecutor(80) as pool:
            codes = list(pool.map(
                lambda _: client.get("/v1/accounts", headers=api.admin).status_code, range(160)))
    finally:
        engine.dispose()
    assert codes == [200] * 160
