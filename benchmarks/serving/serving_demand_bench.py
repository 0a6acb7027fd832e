"""A big serving demand file swapped in under a running daemon (issue 38 row 4).

    .venv/bin/python -m benchmarks.serving.serving_demand_bench [--mb 100] [--cycles 10] [--interval 1]

The daemon's serving step (``serving/live.py``) starts on a small demand file with a pool for
``chat``; then a file of ``--mb`` MB (rows of ``chat`` and of 99 other deployments, ~18 bytes a
row: 100 MB is ~5.6 million rows) replaces it, and ``--cycles`` cycles run ``--interval`` s apart,
each calling the serving step as ``run_cycle`` does. Reported: the longest cycle, the heartbeat's
age at its worst (the longest gap between two cycle ends: the daemon writes its heartbeat once a
cycle), the process's peak RSS (VmHWM) before the swap and at the end, and the load average.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from railgang.daemon.core import Node, make_snapshot
from railgang.daemon.serving.config import ServingSettings
from railgang.daemon.serving.live import LiveServing


def _hwm_mb() -> float:
    with open("/proc/self/status") as fh:
        kb = next(line.split()[1] for line in fh if line.startswith("VmHWM:"))
    return int(kb) / 1024


def _big(path: Path, mb: int) -> int:
    rows = 0
    with path.open("w") as fh:
        fh.write("time_s,deployment,replicas,tp\n")
        block = []
        t = 0
        while fh.tell() < mb * 10**6:
            block = [f"{t + i},d{i % 100},{i % 7},8\n" if i % 100 else f"{t + i},chat,{i % 3},8\n"
                     for i in range(100_000)]
            fh.writelines(block)
            rows += len(block)
            t += 100_000
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rg-demand-bench-") as d:
        demand = Path(d) / "demand.csv"
        demand.write_text("time_s,deployment,replicas,tp,max_replicas\n0,chat,1,8,2\n0,code,1,2,2\n")
        live = LiveServing(ServingSettings(enabled=True, demand_file=demand,
                                           pools={"chat": "n[000-001]"}), 0.0)
        snap = make_snapshot(now=60.0, fabric=None, nodes=[Node(f"n{i:03d}", 8) for i in range(4)])
        live.step(snap)
        before = _hwm_mb()
        big = Path(d) / "big.csv"
        rows = _big(big, args.mb)
        os.replace(big, demand)
        longest, worst_gap = 0.0, 0.0
        last_end = time.monotonic()
        for _ in range(args.cycles):
            t0 = time.monotonic()
            live.step(snap)
            end = time.monotonic()
            longest, worst_gap = max(longest, end - t0), max(worst_gap, end - last_end)
            last_end = end
            time.sleep(args.interval)
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"{args.mb} MB, {rows:,} rows: longest cycle {longest:.2f} s, heartbeat age at "
              f"worst {worst_gap:.2f} s; peak RSS {before:.0f} MB before the swap, "
              f"{_hwm_mb():.0f} MB after; load {' '.join(load)}")


if __name__ == "__main__":
    main()
