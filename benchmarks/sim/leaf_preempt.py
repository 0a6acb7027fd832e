"""Whole-leaf gangs on a tree fabric, through the real decision core in the simulator (issue 21,
"the same gap on today's tree fabric"): ``block_preempt``'s three railgang runs on the issue's
64 nodes × 8 GPUs with leaves of 8 nodes.

Jobs arrive as a Poisson stream at ``--load``: 1-8 GPU jobs, 2- and 4-node gangs and whole-leaf
gangs (8 nodes, 64 GPUs, TP 8), log-normal run times (median 40 min). The whole-leaf gangs are
production (class 1) and may evict the batch rest. Every run has the daemon's leaf waits
(``leaf_wait_s`` 120 s, ``leaf_wait_max_s`` 600 s). There is no Slurm row: ``--switches=1`` is
measured only on the real slurmctld (``benchmarks/slurm/slurm_placement_stream.py``).

    .venv/bin/python -m benchmarks.sim.leaf_preempt --jobs 600 --load 1.0 --seed 0
"""

from __future__ import annotations

import argparse
import math
import os
import random

from benchmarks.core.block_preempt import NAMES, run_one, seconds
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

NODES, GPN, PER_LEAF = 64, 8, 8
LEAF = GPN * PER_LEAF
# (GPUs, TP, weight): small jobs inside a node, 2- and 4-node gangs, whole-leaf gangs
MIX = ((1, 1, 20), (2, 1, 10), (4, 4, 12), (8, 8, 16), (16, 8, 14), (32, 8, 10), (LEAF, 8, 8))


def trace(count: int, load: float, seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    weights = [w for *_, w in MIX]
    mean_run = math.exp(math.log(2400) + 0.5)
    mean_gpus = sum(g * w for g, _, w in MIX) / sum(weights)
    rate = load * NODES * GPN / (mean_gpus * mean_run)
    t, out = 0.0, []
    for j in range(count):
        t += rng.expovariate(rate)
        gpus, tp, _ = rng.choices(MIX, weights)[0]
        out.append(TraceJob(f"j{j}", t, gpus, rng.lognormvariate(math.log(2400), 1.0), tp=tp,
                            priority_class=1 if gpus >= LEAF else 3))  # type: ignore[arg-type]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=600)
    ap.add_argument("--load", type=float, default=1.0)
    ap.add_argument("--churn-cap", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--patience", type=seconds, default=0.0, metavar="S",
                    help="domain_patience_s of the whole-domain rows (0: evict at once)")
    ap.add_argument("--leaf-wait", type=seconds, nargs=2, metavar=("S", "MAX_S"),
                    help="leaf_wait_s and leaf_wait_max_s of the whole-domain rows (default 120 600)")
    ap.add_argument("--burst", type=int, default=0, metavar="GPUS",
                    help="churn_burst_gpus of the whole-domain rows (0: the churn cap; a leaf is 64)")
    ap.add_argument("--backfill-held-leaf", action="store_true",
                    help="backfill_held_leaf in the whole-domain rows")
    args = ap.parse_args()
    fabric = fabric_from_shape(NODES, GPN, PER_LEAF)
    jobs = trace(args.jobs, args.load, args.seed)
    print("| run | whole-leaf gangs inside one leaf | whole-leaf wait (min), started | smaller jobs: mean wait "
          "(min) | GPU-h stranded | GPU-h lost to evictions + moves | evictions (moves) |")
    print("| --- " * 7 + "|")
    for name in NAMES[1:]:
        r = run_one(name, jobs, fabric, None, args.churn_cap, big_gpus=LEAF, patience_s=args.patience,
                    leaf_wait=tuple(args.leaf_wait) if args.leaf_wait else None, burst_gpus=args.burst, lend=args.backfill_held_leaf)
        print(f"| {name} | {r['rack_in_one']:.0f}/{r['racks']:.0f} | {r['big_wait_min']:.1f} "
              f"({r['big_started']:.0f}/{r['big_total']:.0f}) | {r['small_wait_min']:.1f} | {r['stranded_gpu_h']:.0f} | "
              f"{r['lost_gpu_h']:.1f} | {r['evictions']:.0f} ({r['moves']:.0f}) |", flush=True)
    print(f"\n{NODES} nodes x {GPN} GPUs, leaves of {PER_LEAF}, {args.jobs} jobs, offered load {args.load}, churn cap "
          f"{args.churn_cap}, seed {args.seed}, policy slurm, patience {args.patience:.0f} s, leaf wait "
          f"{args.leaf_wait or [120, 600]}, burst {args.burst}, backfill held leaf {args.backfill_held_leaf}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
