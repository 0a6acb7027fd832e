"""Latency of the API's main reads: 50 concurrent clients on loopback against `railgang api`
(uvicorn, one process) over a ledger holding a synthetic day of a 10,000-GPU cluster.

    .venv/bin/python -m benchmarks.api.api_bench [--url URL] [--clients 50] [--requests 3000]

Default URL: a fresh SQLite file. For PostgreSQL pass an empty database's URL. Each client
sends its share of a fixed, shuffled request list (bounded count), one request at a time; the
benchmark prints p50/p99 per route and overall, throughput, and `uptime` load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx

from benchmarks.api.ledger_bench import DAY0, TEAMS, load, synthetic_day
from railgang.daemon.config import LedgerSettings
from railgang.daemon.ledger.ingest import ingest_window
from railgang.db import migrate
from railgang.db.repositories import explanations, org, tokens
from railgang.db.session import make_engine, session_scope

# the synthetic day is written in Slurm 22.05's schema, which sacct --json names in its meta
META = {"Slurm": {"release": "22.05.8", "version": {"major": 22, "micro": 8, "minor": 5}},
        "plugin": {"name": "Slurm OpenAPI DB v0.0.38", "type": "openapi/dbv0.0.38"}}


def seed(url: str) -> tuple[str, str]:
    migrate.upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        org.create_account(s, actor="bench", name="ml", level="org", parent=None,
                           guaranteed_gpus=10000)
        for d in range(4):
            org.create_account(s, actor="bench", name=f"dept-{d}", level="dept", parent="ml",
                               guaranteed_gpus=2500, limit_gpus=4000)
        for i, team in enumerate(TEAMS):
            org.create_account(s, actor="bench", name=team, level="team",
                               parent=f"dept-{i % 4}", guaranteed_gpus=200, limit_gpus=600)
        _, admin = tokens.create(s, actor="bench", name="bench-admin", role="admin", teams=[],
                                 expires_at=None)
        _, reader = tokens.create(s, actor="bench", name="bench-reader", role="team-reader",
                                  teams=["team-07"], expires_at=None)
        rows = [explanations.ExplanationRow(str(j), "waiting" if j % 3 else "running",
                                            TEAMS[j % 40], 3, 8, reason="resources",
                                            position=j, queue_length=1000)
                for j in range(1000)]
        explanations.upsert(s, rows, cycle_id=1, at=datetime.now(UTC))
    day = synthetic_day(10_000)
    recs = [r for _, _, r in day]
    for r in recs[-800:]:  # the day's last jobs are still running: open segments
        r["time"]["end"] = 0
    cfg = LedgerSettings(cluster="big")
    ingest_window(engine, lambda a, b: json.dumps({"errors": [], "jobs": recs, "meta": META}),
                  datetime.fromtimestamp(DAY0, UTC), datetime.fromtimestamp(DAY0 + 2 * 86400, UTC),
                  settings=cfg, cluster="big")
    engine.dispose()
    return admin, reader


def requests(n: int, mix: str = "all") -> list[tuple[str, str]]:
    win = (f"since={datetime.fromtimestamp(DAY0, UTC).isoformat()}"
           f"&until={datetime.fromtimestamp(DAY0 + 86400, UTC).isoformat()}").replace("+", "%2B")
    routes = [
        ("accounts", "/v1/accounts?limit=100"),
        ("effective-quota", "/v1/accounts/team-07/effective-quota"),
        ("usage by team", f"/v1/usage?{win}&group_by=team"),
        ("chargeback team,type,tier", f"/v1/chargeback?{win}&group_by=team,gpu_type,capacity"),
        ("jobs", "/v1/jobs?limit=50"),
        ("job explain", "/v1/jobs/42"),
    ]
    if mix == "light":
        routes = [r for r in routes if not r[0].startswith(("usage", "chargeback"))]
    rng = random.Random(3)
    return [rng.choice(routes) for _ in range(n)]


async def drive(base: str, token: str, plan: list[tuple[str, str]], clients: int
                ) -> tuple[dict[str, list[float]], float, int]:
    lat: dict[str, list[float]] = {}
    errors = 0
    queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    for item in plan:
        queue.put_nowait(item)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60,
                                 headers={"Authorization": f"Bearer {token}"}) as client:

        async def worker() -> None:
            nonlocal errors
            while not queue.empty():
                name, path = queue.get_nowait()
                t0 = time.perf_counter()
                res = await client.get(path)
                lat.setdefault(name, []).append(time.perf_counter() - t0)
                errors += res.status_code >= 400

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return lat, time.perf_counter() - t0, errors


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", default=None)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--port", type=int, default=19880)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--mix", choices=["all", "light"], default="all",
                    help="light: no usage/chargeback aggregations")
    args = ap.parse_args()
    url = args.url or f"sqlite:///{tempfile.mkdtemp(prefix='rg-api-bench-')}/a.sqlite"
    admin, _reader = seed(url)
    env = {**os.environ, "RAILGANG_DB__URL": url}
    server = subprocess.Popen([str(Path(sys.executable).parent / "railgang"), "api", "--port",
                               str(args.port), "--log-level", "warning", "--workers",
                               str(args.workers)], env=env)
    base = f"http://127.0.0.1:{args.port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # every worker process must be up before the clock starts
            try:
                if all(httpx.get(f"{base}/healthz", timeout=2).status_code == 200
                       for _ in range(2 * args.workers)):
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("railgang api did not come up")
            time.sleep(0.5)
        time.sleep(1.0 * args.workers)
        asyncio.run(drive(base, admin, requests(200), 10))  # warm-up
        lat, wall, errors = asyncio.run(drive(base, admin, requests(args.requests, args.mix),
                                              args.clients))
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"db {make_engine(url).url.render_as_string(hide_password=True)}; mix {args.mix}, "
          f"{args.workers} worker(s), {args.clients} clients, {args.requests} requests in {wall:.1f} s "
          f"({args.requests / wall:.0f} req/s), errors {errors}; load {load()}")
    everything = [x for v in lat.values() for x in v]
    for name, values in [*sorted(lat.items()), ("all", everything)]:
        print(f"  {name:28} n={len(values):5}  p50 {pct(values, 0.5):7.1f} ms  "
              f"p99 {pct(values, 0.99):7.1f} ms  mean {statistics.mean(values) * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
