"""Bring-up and tear-down time and memory footprint of the local 16-node Slurm cluster.

Run as root: .venv/bin/python -m benchmarks.slurm.devcluster_bench [--rounds 3] [--no-accounting]
Uses its own directory and ports, so it does not disturb a running `railgang devcluster`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from pathlib import Path

from railgang.devcluster.cluster import DevCluster
from railgang.devcluster.layout import ClusterSpec


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--no-accounting", action="store_true")
    args = ap.parse_args()
    root = Path("/tmp/railgang-bench-devcluster")
    shutil.rmtree(root, ignore_errors=True)
    spec = ClusterSpec(dir=root, nodes=args.nodes, accounting=not args.no_accounting,
                       slurmctld_port=28817, slurmdbd_port=28819, mariadb_port=28306,
                       slurmd_base_port=28900)  # ports below the ephemeral range (32768+)
    cluster = DevCluster(spec)
    ups, downs = [], []
    rss: dict[str, int] = {}
    for i in range(args.rounds + 1):
        t0 = time.perf_counter()
        cluster.up()
        t_up = time.perf_counter() - t0
        if i == args.rounds:  # measure memory once, after the last bring-up, when all is idle
            time.sleep(2)
            for rec in cluster.procs.records():
                kind = rec.name.split("-")[0]
                rss[kind] = rss.get(kind, 0) + rss_kib(rec.pid)
        t0 = time.perf_counter()
        cluster.down()
        t_down = time.perf_counter() - t0
        label = "first (initialises MariaDB)" if i == 0 else f"round {i}"
        print(f"{label}: up {t_up:.2f} s, down {t_down:.2f} s")
        if i > 0 or args.no_accounting:
            ups.append(t_up)
            downs.append(t_down)
    print(f"\n{args.nodes} nodes, accounting={'off' if args.no_accounting else 'on'}, "
          f"{len(ups)} warm rounds: up median {statistics.median(ups):.2f} s "
          f"(max {max(ups):.2f}), down median {statistics.median(downs):.2f} s (max {max(downs):.2f})")
    total = sum(rss.values())
    print("RSS by process kind (MiB): " + ", ".join(f"{k} {v / 1024:.1f}" for k, v in sorted(rss.items()))
          + f"; total {total / 1024:.1f}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
