"""Ledger numbers: a synthetic day of a 10,000-GPU cluster's sacct output ingested in hourly
windows (and again, to show re-ingest costs the same and changes nothing), then chargeback over
1,000,000 ledger rows (one SQL aggregation).

    .venv/bin/python -m benchmarks.api.ledger_bench [--url URL] [--rows 1000000] [--gpus 10000]

Default URL: a fresh SQLite file under /tmp. For PostgreSQL pass an empty database's URL (the
benchmark migrates it and fills it). Prints one line per measurement, with `uptime` load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, func, insert, select

from railgang.daemon.config import LedgerSettings
from railgang.daemon.ledger.ingest import ingest_window
from railgang.db import migrate
from railgang.db.models import Account, Job, UsageRecord
from railgang.db.org import Rate
from railgang.db.repositories import ledger
from railgang.db.session import make_engine, session_scope

DAY0 = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp())
TEAMS = [f"team-{i:02d}" for i in range(40)]
SIZES = [1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 16, 32, 64, 128]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _rec(job: int, team: str, start: int, end: int, submit: int, gpus: int, state: str,
         gpu_type: str) -> dict[str, Any]:
    return {"account": team, "cluster": "big", "job_id": job, "user": f"u{job % 300}",
            "partition": "gpu", "nodes": f"n[{job % 1000:04d}-{job % 1000 + gpus // 8:04d}]",
            "comment": {"job": f"rg-labels:experiment=e{job % 50}" if job % 3 == 0 else None},
            "state": {"current": state}, "time": {"start": start, "end": end,
                                                  "submission": submit},
            "tres": {"allocated": [{"type": "gres", "name": f"gpu:{gpu_type}",
                                    "count": gpus}]}}


def synthetic_day(gpus: int, seed: int = 7) -> list[tuple[int, int, dict[str, Any]]]:
    """(segment start, segment end, record) for a day at ~85 % allocation: jobs of 1-128 GPUs,
    log-normal run times (median ~18 min), 10 % resized once, 5 % requeued once."""
    rng = random.Random(seed)
    out: list[tuple[int, int, dict[str, Any]]] = []
    busy = 0.0
    job = 0
    t = DAY0
    while t < DAY0 + 86400:
        # keep ~85 % of the GPUs allocated: start jobs until the running GPU-seconds target
        job += 1
        g = rng.choice(SIZES)
        dur = max(60, int(rng.lognormvariate(7.0, 1.2)))
        team = rng.choice(TEAMS)
        gtype = "h200" if job % 4 else "a100"
        start = t
        if rng.random() < 0.10:  # resized: RESIZING then the final record
            cut = start + dur // 2
            out.append((start, cut, _rec(job, team, start, cut, start - 30, g, "RESIZING", gtype)))
            out.append((cut, start + dur, _rec(job, team, start, start + dur, cut, max(1, g // 2),
                                               "COMPLETED", gtype)))
        elif rng.random() < 0.05:  # requeued: REQUEUED then a second run
            stop = start + dur // 3
            again = stop + 120
            out.append((start, stop, _rec(job, team, start, stop, start - 30, g, "REQUEUED",
                                          gtype)))
            out.append((again, again + dur, _rec(job, team, again, again + dur, stop, g,
                                                 "COMPLETED", gtype)))
        else:
            out.append((start, start + dur, _rec(job, team, start, start + dur, start - 30, g,
                                                 "COMPLETED", gtype)))
        busy += g * dur
        # advance time so that the mean allocation is 85 % of the cluster
        t = DAY0 + int(busy / (0.85 * gpus))
    return out


def bench_ingest(engine: Engine, gpus: int) -> None:
    day = synthetic_day(gpus)
    windows = []
    for h in range(24):
        lo, hi = DAY0 + 3600 * h, DAY0 + 3600 * (h + 1)
        recs = [r for s, e, r in day if s < hi and e > lo]
        windows.append((lo, hi, json.dumps({"errors": [], "jobs": recs})))
    size = sum(len(w[2]) for w in windows)
    in_day = len({(r["job_id"], s) for s, e, r in day if s < DAY0 + 86400})
    cfg = LedgerSettings(cluster="big")
    for attempt in ("first", "again"):
        t0 = time.perf_counter()
        for lo, hi, text in windows:
            ingest_window(engine, lambda a, b, text=text: text,  # type: ignore[misc]
                          datetime.fromtimestamp(lo, UTC), datetime.fromtimestamp(hi, UTC),
                          settings=cfg, cluster="big")
        dt = time.perf_counter() - t0
        with session_scope(engine) as s:
            rows = s.scalar(select(func.count()).select_from(UsageRecord))
        print(f"ingest day ({attempt}): {in_day} segments of "
              f"{len({r['job_id'] for _, _, r in day})} jobs, 24 hourly windows "
              f"({size / 1e6:.1f} MB JSON): {dt:.1f} s, {in_day / dt:,.0f} segments/s; "
              f"ledger rows {rows}; load {load()}", flush=True)


def fill(engine: Engine, rows: int) -> None:
    """Bulk rows for the chargeback measurement: 2 segments per job, 30 days, 40 teams."""
    rng = random.Random(11)
    with session_scope(engine) as s:
        have = s.scalar(select(func.count()).select_from(UsageRecord)) or 0
        for team in TEAMS:
            if s.scalar(select(Account.id).where(Account.name == team)) is None:
                s.add(Account(name=team, level="team", guaranteed_gpus=0,
                              created_at=datetime.now(UTC)))
        for gt, cap, price in (("h200", "reserved", 2.5), ("a100", "reserved", 1.2),
                               ("h200", "spot", 1.0)):
            if s.scalar(select(Rate.id).where(Rate.gpu_type == gt, Rate.capacity == cap)) is None:
                s.add(Rate(gpu_type=gt, capacity=cap, per_gpu_hour=price, currency="USD"))
    need = rows - have
    t0 = time.perf_counter()
    base = 10_000_000
    chunk = 20_000
    made = 0
    while made < need:
        n_jobs = min(chunk, need - made) // 2 + 1
        jobs: list[dict[str, Any]] = []
        segs: list[dict[str, Any]] = []
        first = base + made
        now = datetime.now(UTC)
        for i in range(n_jobs):
            jid = first + i
            jobs.append({"id": jid, "slurm_job_id": str(jid), "cluster": "bulk",
                         "account": rng.choice(TEAMS), "user": f"u{jid % 300}", "gpus": 8,
                         "priority_class": 3, "hints": "", "submitted_at": now,
                         "state": "COMPLETED"})
            start = DAY0 + rng.randrange(30 * 86400)
            for k in range(2):
                if made + len(segs) >= need:
                    break
                end = start + rng.randrange(60, 20000)
                segs.append({"job_id": jid, "segment": k, "account": jobs[-1]["account"],
                             "user": jobs[-1]["user"], "gpu_type": rng.choice(["h200", "a100"]),
                             "gpus": rng.choice(SIZES), "nodes": "n[0001-0002]",
                             "started_at": datetime.fromtimestamp(start, UTC),
                             "ended_at": datetime.fromtimestamp(end, UTC), "start_epoch": start,
                             "end_epoch": end, "tier": "guaranteed",
                             "capacity": "spot" if jid % 7 == 0 else "reserved",
                             "gpu_ids": "", "source": "bench",
                             "compute_fraction": rng.random() if jid % 2 else None,
                             "productive_fraction": None})
                start = end
        with engine.begin() as conn:
            conn.execute(insert(Job), jobs)
            conn.execute(insert(UsageRecord), segs)
        made += len(segs)
    print(f"filled {need} ledger rows in {time.perf_counter() - t0:.0f} s; load {load()}",
          flush=True)


def bench_chargeback(engine: Engine) -> None:
    with session_scope(engine) as s:
        total = s.scalar(select(func.count()).select_from(UsageRecord))
    since, until = DAY0 - 86400, DAY0 + 32 * 86400
    now = int(time.time())
    for group in (("team",), ("team", "gpu_type", "capacity"), ("department", "user"),
                  ("label",)):
        q = ledger.UsageQuery(since=since, until=until, now=now, group_by=group,
                              label="experiment" if group == ("label",) else None, limit=1000)
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            with session_scope(engine) as s:
                n, _rows = ledger.usage(s, q)
            times.append(time.perf_counter() - t0)
        print(f"chargeback over {total:,} rows group_by={','.join(group)}: best "
              f"{min(times):.2f} s, worst {max(times):.2f} s ({n} groups); load {load()}",
              flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", default=None)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--gpus", type=int, default=10_000)
    ap.add_argument("--skip-ingest", action="store_true")
    args = ap.parse_args()
    url = args.url or f"sqlite:///{tempfile.mkdtemp(prefix='rg-ledger-bench-')}/l.sqlite"
    migrate.upgrade(url)
    engine = make_engine(url)
    print(f"db {engine.url.render_as_string(hide_password=True)}; load {load()}", flush=True)
    if not args.skip_ingest:
        bench_ingest(engine, args.gpus)
    fill(engine, args.rows)
    bench_chargeback(engine)
    engine.dispose()


if __name__ == "__main__":
    main()
