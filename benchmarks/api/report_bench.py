"""Time to build the utilisation report for a month of a 1,000-GPU cluster.

    .venv/bin/python -m benchmarks.api.report_bench [--url URL] [--nodes 125] [--days 30]
        [--interval-s 300] [--jobs-per-day 250]

A seeded synthetic trace (a month of jobs, 1-64 GPUs, 10 min to 12 h, four priority classes,
six teams) is replayed through the real core on ``nodes`` x 8 GPUs (``railgang sim --ledger``'s
code path); segments, step timings and per-GPU samples every ``interval_s`` for every GPU go
into the ledger (default: a fresh SQLite file). Then it times (1) the report of the month's
last full day, built the way ``railgang report`` / the nightly job builds it (with 14 days of
team history and the 72-h idle-reservation lookback), and (2) all daily reports of the month
written to disk (HTML, CSV, JSON), and prints the numbers with ``uptime``'s load average.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from railgang.daemon.core.model.job import PriorityClass
from railgang.daemon.core.policies.registry import get
from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.service import make_report, parse_day, write_day
from railgang.daemon.sim.engine import EngineConfig
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.telemetry import TelemetryConfig, simulate_with_ledger, write_ledger
from railgang.daemon.sim.traces.model import TraceJob
from railgang.db import migrate
from railgang.db.session import make_engine, session_scope
from railgang.topology.fabric import fabric_from_shape

TEAMS = ("vision", "nlp", "speech", "rl", "infra", "research")


def trace(days: int, per_day: int, seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(days * per_day):
        t += rng.expovariate(per_day / 86400)
        gpus = rng.choice([1, 1, 1, 2, 4, 8, 8, 8, 16, 32, 64])
        out.append(TraceJob(f"m{i:06d}", t, gpus, rng.uniform(600, 12 * 3600),
                            account=rng.choice(TEAMS), priority_class=PriorityClass(rng.choice([1, 2, 3, 3, 3]))))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url")
    ap.add_argument("--nodes", type=int, default=125)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--interval-s", type=float, default=300.0)
    ap.add_argument("--jobs-per-day", type=int, default=250)  # ~80 % of 1,000 GPUs
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rg-report-bench-"))
    url = args.url or f"sqlite:///{tmp / 'ledger.sqlite'}"
    migrate.upgrade(url)
    fabric = fabric_from_shape(args.nodes, 8, 8)
    jobs = trace(args.days, args.jobs_per_day, args.seed)
    t0 = time.perf_counter()
    result, segments, tiers = simulate_with_ledger(jobs, get("default"), fabric,
                                                   config=EngineConfig(),
                                                   comm=TopologyComm(fabric))
    t_sim = time.perf_counter() - t0
    cfg = TelemetryConfig(interval_s=args.interval_s, seed=args.seed)
    engine = make_engine(url)
    t0 = time.perf_counter()
    stats = write_ledger(engine, jobs, result, segments, fabric, cfg, node_tier=tiers)
    t_fill = time.perf_counter() - t0
    first = datetime.fromtimestamp(cfg.start_epoch, UTC).date()
    days = [(first + timedelta(days=i)).isoformat() for i in range(args.days)]
    now = datetime.fromtimestamp(stats.until, UTC) + timedelta(days=1)
    settings = ReportSettings()
    t0 = time.perf_counter()
    with session_scope(engine) as s:
        last = make_report(s, parse_day(days[-1]), settings, now=now)
    t_last = time.perf_counter() - t0
    per_day = []
    for d in days:
        t0 = time.perf_counter()
        with session_scope(engine) as s:
            write_day(s, parse_day(d), settings, tmp / "reports" / d, now=now)
        per_day.append(time.perf_counter() - t0)
    engine.dispose()
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    gpus = args.nodes * 8
    print(f"cluster: {gpus} GPUs ({args.nodes} nodes); {len(jobs):,} jobs over {args.days} days")
    print(f"ledger: {stats.segments:,} segments, {stats.samples:,} GPU samples every "
          f"{args.interval_s:g} s, {stats.step_timings:,} step timings ({url.split('://')[0]})")
    print(f"replay {t_sim:.1f} s, ledger fill {t_fill:.1f} s")
    print(f"report of the last day ({days[-1]}): {t_last:.2f} s, {len(last.anomalies)} "
          f"anomalies, {last.totals['allocated_pct']} % allocated")
    print(f"all {len(days)} daily reports written (HTML+CSV+JSON): {sum(per_day):.1f} s "
          f"(median {statistics.median(per_day):.2f} s/day, max {max(per_day):.2f} s)")
    print(f"load: {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
