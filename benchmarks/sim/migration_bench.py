"""A spine degraded mid-trace: JCT and goodput with and without migration (R-T8, issue 11 part 6).

Writes a seeded trace of multi-node gangs (8-64 GPUs, TP 8) and a three-level fat tree (leaves
of 8 nodes, two leaves per spine), then runs ``railgang sim`` three ways per seed: healthy links,
``--degrade SPEC --no-migrate`` and ``--degrade SPEC`` (the core may migrate). Prints one line per
run and the means over the seeds as a Markdown table (BENCHMARKS.md).

    .venv/bin/python -m benchmarks.sim.migration_bench --seeds 1,2,3 --degrade 'spine1@6h:0.3'
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import REPO

ROOT = REPO
RAILGANG = str(ROOT / ".venv" / "bin" / "railgang")
KEYS = ("mean_jct_s", "p95_jct_s", "util_productive", "util_allocated", "preemptions")


def write_trace(path: Path, jobs: int, seed: int, gap_s: float) -> None:
    rng = random.Random(seed)
    t = 0.0
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("job_id", "submit_time", "gpus", "duration_s", "account", "tp", "dp", "class"))
        for i in range(jobs):
            t += rng.expovariate(1 / gap_s)
            gpus = rng.choice((8, 16, 16, 32, 32, 64))
            dur = round(min(12 * 3600, rng.lognormvariate(8.6, 0.8)), 1)
            w.writerow((f"j{i:03d}", round(t, 1), gpus, dur, rng.choice("abc"), 8, gpus // 8,
                        rng.choice((1, 2, 3, 3))))


def sim(trace: Path, topo: Path, policy: str, comm: float, extra: list[str]) -> dict[str, Any]:
    cmd = [RAILGANG, "sim", "--trace", str(trace), "--topology", str(topo), "--policy", policy,
           "--comm-share", str(comm), "--json", "-q", *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout)["results"][policy]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--gap-s", type=float, default=420.0, help="mean inter-arrival (load)")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--degrade", default="spine1@6h:0.3")
    ap.add_argument("--policy", default="default")
    ap.add_argument("--comm-share", type=float, default=0.3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rg-migration-"))
    topo = tmp / "topology.conf"
    topo.write_text(subprocess.run(
        [RAILGANG, "topology", "generate", "--nodes", str(args.nodes), "--nodes-per-leaf", "8",
         "--leaves-per-spine", "2"], capture_output=True, text=True, check=True).stdout)
    variants = {"healthy": [], "degraded, no migration": ["--degrade", args.degrade, "--no-migrate"],
                "degraded, migration": ["--degrade", args.degrade]}
    sums: dict[str, dict[str, float]] = {v: dict.fromkeys((*KEYS, "migrations"), 0.0) for v in variants}
    seeds = [int(s) for s in args.seeds.split(",")]
    for seed in seeds:
        trace = tmp / f"trace-{seed}.csv"
        write_trace(trace, args.jobs, seed, args.gap_s)
        for name, extra in variants.items():
            r = sim(trace, topo, args.policy, args.comm_share, extra)
            row = {k: float(r[k]) for k in KEYS} | {"migrations": float(r.get("migrations", 0))}
            for k, v in row.items():
                sums[name][k] += v
            print(f"seed {seed} {name:24s} " + " ".join(f"{k}={v:,.3f}" for k, v in row.items()),
                  file=sys.stderr)
    n = len(seeds)
    print(f"| {args.jobs} jobs x {n} seeds, {args.nodes} nodes, {args.degrade} | mean JCT h | "
          "p95 JCT h | goodput (productive util) | allocated util | preemptions | migrations |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, s in sums.items():
        print(f"| {name} | {s['mean_jct_s'] / n / 3600:.2f} | {s['p95_jct_s'] / n / 3600:.2f} | "
              f"{s['util_productive'] / n:.3f} | {s['util_allocated'] / n:.3f} | "
              f"{s['preemptions'] / n:.0f} | {s['migrations'] / n:.1f} |")
    print(f"load average: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
