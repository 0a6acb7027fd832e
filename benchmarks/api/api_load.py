"""Open-loop load on the admin API: a read mix sent at fixed rates, whatever the answers do.

    .venv/bin/python -m benchmarks.api.api_load [--db sqlite|postgres|URL] [--rates 25,50,100,200,400]
        [--seconds 10] [--workers 2] [--port 19890] [--pg-port 11817] [--json FILE]

Request i of a rate R is due at t0 + i / R (a fixed schedule: a slow answer does not slow the
sender, so queueing in the server shows as latency, unlike a closed loop of N clients). Latency is
measured from the request's due time to the last byte of its answer, so a sender that falls
behind is charged too (no coordinated omission); the sender's own lag is printed apart.

The client is raw asyncio HTTP/1.1 on keep-alive connections (a connection per request in
flight, reused when idle): cheaper than httpx on a 2-core machine where it competes with the
server. The server is a real `railgang api --workers N` process over a ledger seeded as in
api_bench.py (a synthetic day of a 10,000-GPU cluster, 40 teams, 1,000 explained jobs);
`--db postgres` starts a private PostgreSQL (tests/support/postgres.py) on --pg-port.
Prints, per rate: sent, achieved rate, p50/p90/p99/max, errors (status >= 400 or broken
connections), and the 1-minute load average after the step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.api.api_bench import requests as read_mix
from benchmarks.api.api_bench import seed
from railgang.db.session import make_engine


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def get(self, raw: bytes) -> int:
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        status = int(lines[0].split()[1])
        length = 0
        close = False
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            k = k.strip().lower()
            if k == b"content-length":
                length = int(v)
            elif k == b"connection" and v.strip().lower() == b"close":
                close = True
        await self.reader.readexactly(length)
        if close:
            raise ConnectionResetError("server closed")
        return status


class Pool:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[Conn] = []
        self.opened = 0

    async def get(self, raw: bytes) -> int:
        reused = bool(self.idle)
        if reused:
            conn = self.idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            conn = Conn(reader, writer)
            self.opened += 1
        try:
            status = await conn.get(raw)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            conn.writer.close()
            if reused and not getattr(exc, "partial", b""):  # closed by the server while
                return await self.get(raw)  # idle (uvicorn's keep-alive timeout): once more
            raise
        except BaseException:
            conn.writer.close()
            raise
        self.idle.append(conn)
        return status


class CpuMeter:
    """CPU seconds (user + system) of the server's process tree, of PostgreSQL's and of this
    client, from /proc: per request, they say where the machine's cores went during a step."""

    def __init__(self, server_pid: int | None, pg_pid: int | None) -> None:
        self.roots = {"api": server_pid, "pg": pg_pid}
        self.tick = os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _tree(pid: int) -> list[int]:
        out, todo = [], [pid]
        while todo:
            p = todo.pop()
            out.append(p)
            with contextlib.suppress(OSError):  # gone meanwhile
                todo += [int(c) for task in Path(f"/proc/{p}/task").glob("*/children")
                         for c in task.read_text().split()]
        return out

    def _seconds(self, pid: int | None) -> float:
        total = 0
        for p in self._tree(pid) if pid is not None else []:
            try:
                fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone: its time is lost unless its parent reaped it
                continue
            # utime, stime, and those of its children that ended (PostgreSQL's autovacuum)
            total += sum(int(f) for f in fields[11:15])
        return total / self.tick

    def read(self) -> dict[str, float]:
        t = os.times()
        return {**{k: self._seconds(v) for k, v in self.roots.items()},
                "client": t.user + t.system}

    def machine(self) -> float:
        """CPU seconds the whole machine has been busy (all processes: the share others
        took of the cores during a step is this minus ours)."""
        cpu = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in cpu[:8])
        return (user + nice + system + irq + softirq + steal) / self.tick


def _raw(path: str, token: str, port: int) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {token}\r\nAccept: */*\r\n\r\n").encode()


async def step(pool: Pool, plan: list[bytes], rate: float,
               meter: CpuMeter | None = None) -> dict[str, Any]:
    cpu0 = meter.read() if meter is not None else {}
    busy0 = meter.machine() if meter is not None else 0.0
    lat: list[float] = []
    errors = 0
    kinds: dict[str, int] = {}
    lag = 0.0

    async def one(raw: bytes, due: float) -> None:
        nonlocal errors
        try:
            status = await asyncio.wait_for(pool.get(raw), timeout=30)
            if status >= 400:
                errors += 1
                kinds[str(status)] = kinds.get(str(status), 0) + 1
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            errors += 1
            kinds[type(exc).__name__] = kinds.get(type(exc).__name__, 0) + 1
        lat.append(time.perf_counter() - due)

    tasks = []
    t0 = time.perf_counter() + 0.05
    for i, raw in enumerate(plan):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        lag = max(lag, time.perf_counter() - due)
        tasks.append(asyncio.create_task(one(raw, due)))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    lat.sort()
    cpu = {k: round((v - cpu0[k]) * 1000 / len(plan), 2)  # ms of CPU per request
           for k, v in (meter.read() if meter is not None else {}).items()}
    busy = (meter.machine() - busy0) / wall if meter is not None else 0.0

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000

    return {"rate": rate, "sent": len(plan), "achieved": round(len(plan) / wall, 1),
            "p50_ms": round(pct(0.5), 1), "p90_ms": round(pct(0.9), 1),
            "p99_ms": round(pct(0.99), 1), "max_ms": round(lat[-1] * 1000, 1),
            "errors": errors, "error_kinds": kinds, "sender_lag_ms": round(lag * 1000, 1),
            "load1": round(os.getloadavg()[0], 2), "cpu_ms_per_request": cpu,
            "cores_busy": round(sum(cpu.values()) * len(plan) / 1000 / wall, 2),
            "cores_busy_others": round(busy - sum(cpu.values()) * len(plan) / 1000 / wall, 2)}


async def run(port: int, token: str, rates: list[float], seconds: float,
              mix: list[tuple[str, str]], meter: CpuMeter | None = None
              ) -> list[dict[str, Any]]:
    pool = Pool("127.0.0.1", port)
    rng = random.Random(7)
    raws = [_raw(p, token, port) for p in sorted(set(dict(mix).values()))]  # uniform
    await step(pool, [rng.choice(raws) for _ in range(200)], 50)  # warm-up: pools, caches
    out = []
    for rate in rates:
        res = await step(pool, [rng.choice(raws) for _ in range(int(rate * seconds))], rate,
                         meter)
        print(f"  {rate:6.0f} req/s  sent {res['sent']:5}  achieved {res['achieved']:6.1f}  "
              f"p50 {res['p50_ms']:7.1f}  p90 {res['p90_ms']:7.1f}  p99 {res['p99_ms']:7.1f}  "
              f"max {res['max_ms']:7.1f} ms  errors {res['errors']} {res['error_kinds'] or ''}  "
              f"sender lag {res['sender_lag_ms']} ms  load {res['load1']}", flush=True)
        if res["cpu_ms_per_request"]:
            print("         CPU ms per request: " + ", ".join(
                f"{k} {v}" for k, v in res["cpu_ms_per_request"].items())
                  + f"; cores busy {res['cores_busy']}, others' {res['cores_busy_others']}",
                  flush=True)
        out.append(res)
        if float(res["p99_ms"]) > 5000:  # saturated: a higher rate only adds minutes of timeouts
            print("  (stopping: p99 over 5 s)")
            break
        await asyncio.sleep(2)  # let the queue drain and the load settle a little
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default="sqlite", help="sqlite, postgres, or a database URL")
    ap.add_argument("--rates", default="25,50,100,200,400")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--port", type=int, default=19890)
    ap.add_argument("--pg-port", type=int, default=11817)
    ap.add_argument("--pg-root", type=Path, default=Path("/tmp/rg-api-load-pg"),
                    help="the private server's folder (wiped first)")
    ap.add_argument("--mix", choices=["all", "light"], default="all")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    pg = None
    if args.db == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp(prefix='rg-api-load-')}/a.sqlite"
    elif args.db == "postgres":
        from tests.support.postgres import PrivatePostgres

        pg = PrivatePostgres(args.pg_root, port=args.pg_port)  # the postgres user must reach it
        pg.start()
        url = pg.url
    else:
        url = args.db
    server = None
    try:
        t = time.perf_counter()
        admin, _reader = seed(url)
        if pg is not None:  # the bulk load's autovacuum and analyse would run during the steps
            with make_engine(url).connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
                    "VACUUM ANALYZE")
        print(f"seeded in {time.perf_counter() - t:.1f} s", flush=True)
        env = {**os.environ, "RAILGANG_DB__URL": url}
        server = subprocess.Popen([str(Path(sys.executable).parent / "railgang"), "api",
                                   "--port", str(args.port), "--log-level", "warning",
                                   "--workers", str(args.workers)], env=env,
                                  start_new_session=True)  # its own group: workers included
        base = f"http://127.0.0.1:{args.port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("railgang api did not come up")
            time.sleep(0.5)
        time.sleep(1.0 * args.workers)
        print(f"db {args.db if args.db in ('sqlite', 'postgres') else 'url'}, "
              f"{args.workers} worker(s), mix {args.mix}, {args.seconds:g} s per rate, "
              f"load before {os.getloadavg()[0]:.2f}", flush=True)
        rates = [float(r) for r in args.rates.split(",")]
        pg_pid = pg._running_pid() if pg is not None else None
        results = asyncio.run(run(args.port, admin, rates, args.seconds,
                                  read_mix(200, args.mix), CpuMeter(server.pid, pg_pid)))
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        if pg is not None:
            pg.stop()
    crossed = next((r["rate"] for r in results if float(r["p99_ms"]) >= 50), None)
    print(f"p99 crosses 50 ms at: {crossed if crossed is not None else 'none of the rates'}")
    if args.json is not None:
        args.json.write_text(json.dumps({"db": args.db, "workers": args.workers,
                                         "mix": args.mix, "results": results}, indent=1))


if __name__ == "__main__":
    main()
