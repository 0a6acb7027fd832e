"""What the API's tail latency at 200 req/s was made of (BENCHMARKS.md, issue 36 item 7), each
held as a behaviour, not a timing: the worker's startup heap is frozen out of the garbage
collector (full collections of ~130,000 startup objects stalled a worker 130-260 ms under
load); an aggregation is computed once however many requests miss it together, and an expired
answer is served while one request refreshes it (every 30 s a herd of requests each recomputed
it, 100-700 ms apiece); a bearer token is one query; a request ends its session in one hop
through the thread pool."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import event

from railgang.daemon.api.app import app_from_env
from railgang.daemon.api.cache import TtlCache
from railgang.db.repositories import tokens
from railgang.db.session import session_scope
from tests.daemon.api.conftest import Api


def test_worker_app_freezes_its_startup_heap(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_DB__URL", f"sqlite:///{tmp_path / 'a.sqlite'}")
    gc.unfreeze()
    try:
        app_from_env()
        assert gc.get_freeze_count() > 10_000  # modules, routes, schemas: never garbage
    finally:
        gc.unfreeze()


def _crowd(cache: TtlCache, key: str, compute: Callable[[], int], n: int
           ) -> tuple[list[threading.Thread], list[int]]:
    out: list[int] = []
    threads = [threading.Thread(target=lambda: out.append(cache.get_or_compute(key, compute)))
               for _ in range(n)]
    for t in threads:
        t.start()
    return threads, out


def test_requests_that_miss_together_compute_once() -> None:
    cache = TtlCache(seconds=60, entries=8)
    calls: list[int] = []
    go = threading.Event()

    def slow() -> int:
        calls.append(1)
        go.wait(10)
        return 42

    leader = threading.Thread(target=lambda: cache.get_or_compute("k", slow))
    leader.start()
    while not calls:  # the leader is computing
        go.wait(0.001)
    threads, out = _crowd(cache, "k", slow, 8)
    go.set()
    for t in [leader, *threads]:
        t.join(10)
    assert calls == [1]
    assert out == [42] * 8


def test_an_expired_answer_is_served_while_one_request_refreshes_it() -> None:
    cache = TtlCache(seconds=0.01, entries=8)
    assert cache.get_or_compute("k", lambda: 1) == 1
    threading.Event().wait(0.02)  # expired
    refreshing = threading.Event()
    go = threading.Event()

    def refresh() -> int:
        refreshing.set()
        go.wait(10)
        return 2

    leader = threading.Thread(target=lambda: cache.get_or_compute("k", refresh))
    leader.start()
    assert refreshing.wait(10)
    assert cache.get_or_compute("k", lambda: pytest.fail("a second refresh")) == 1  # stale
    go.set()
    leader.join(10)
    assert cache.get_or_compute("k", lambda: pytest.fail("fresh: no compute")) == 2


def test_a_failed_compute_leaves_the_waiters_to_compute_their_own() -> None:
    cache = TtlCache(seconds=60, entries=8)
    started, go = threading.Event(), threading.Event()

    def failing() -> int:
        started.set()
        go.wait(10)
        raise RuntimeError("database gone")

    errors: list[BaseException] = []

    def lead() -> None:
        try:
            cache.get_or_compute("k", failing)
        except RuntimeError as exc:
            errors.append(exc)

    leader = threading.Thread(target=lead)
    leader.start()
    assert started.wait(10)
    threads, out = _crowd(cache, "k", lambda: 7, 3)
    go.set()
    for t in [leader, *threads]:
        t.join(10)
    assert len(errors) == 1
    assert out == [7, 7, 7]


def test_a_bearer_token_is_one_query(api: Api) -> None:
    statements: list[str] = []

    def count(_conn: object, _cur: object, sql: str, *_: object) -> None:
        statements.append(sql)

    event.listen(api.engine, "before_cursor_execute", count)
    try:
        for headers, role, teams in ((api.admin, "admin", frozenset()),
                                     (api.team_a, "team-reader", frozenset({"team-a"}))):
            statements.clear()
            with session_scope(api.engine) as s:
                p = tokens.authenticate(s, headers["Authorization"].split()[1])
                assert len(statements) == 1, statements
            assert (p.role, p.teams) == (role, teams)
    finally:
        event.remove(api.engine, "before_cursor_execute", count)


def test_a_request_ends_its_session_in_one_thread_hop(api: Api,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    hops: list[str] = []

    async def counted(fn: Callable[..., Any], *args: Any) -> Any:
        hops.append(getattr(fn, "__name__", "?"))
        return await run_in_threadpool(fn, *args)

    monkeypatch.setattr("railgang.daemon.api.deps.run_in_threadpool", counted)
    assert api.client.get("/v1/accounts", headers=api.admin).status_code == 200
    assert len(hops) == 1, hops
