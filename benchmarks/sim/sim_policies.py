"""Every policy on the Philly-derived trace, side by side in one run, plus simulator speed.

    .venv/bin/python -m benchmarks.sim.sim_policies [--limit N] [--nodes 64 --gpus-per-node 8
        --leaf 8] [--policies fifo,slurm,tiresias,themis,pollux,default] [--elastic] [--jobs N]

``--jobs N`` replays N policies at once in worker processes (one replay per process, results
identical to a serial run: each replay is deterministic and shares nothing).

Prints Markdown for BENCHMARKS.md: results per policy, ratios against fifo and against slurm,
and speed (jobs/s per policy, the replay time, extrapolated linearly to 100k jobs). All VCs of
../shared/traces/philly-gavel are merged (or $RAILGANG_PHILLY_DIR).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import railgang.daemon.loop
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import EngineConfig, RunResult, simulate
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.replay import make_elastic
from railgang.daemon.sim.report import ratios
from railgang.daemon.sim.traces.philly import default_dir, read_philly
from railgang.topology.fabric import fabric_from_shape

H = 3600.0
_DECIDE_S = [0.0]
_LOOP = vars(railgang.daemon.loop)  # loop's own name for the core's decide, not its API
_decide = _LOOP["decide"]


def _timed_decide(*args: Any, **kwargs: Any) -> Any:
    t = time.perf_counter()
    try:
        return _decide(*args, **kwargs)
    finally:
        _DECIDE_S[0] += time.perf_counter() - t


_LOOP["decide"] = _timed_decide  # measurement only: how much of a replay is the core


_SHARED: dict[str, Any] = {}  # the trace and fabric, set before forking (not picklable)


def _replay(name: str, cycle_s: float, max_pending: int | None) -> tuple[RunResult, float, float]:
    """One policy's replay, the seconds spent in decide() and the CPU seconds (this process)."""
    _DECIDE_S[0] = 0.0
    cpu = time.process_time()
    jobs, fabric = _SHARED["jobs"], _SHARED["fabric"]
    run = simulate(jobs, get(name), fabric, comm=TopologyComm(fabric),
                   config=EngineConfig(cycle_s=cycle_s, max_pending=max_pending))
    m = run.metrics
    print(f"# {name}: {run.wall_s:.1f} s, mean JCT {m.mean_jct_s / H:.2f} h", file=sys.stderr,
          flush=True)
    return run, _DECIDE_S[0], time.process_time() - cpu


def h(x: float) -> str:
    return "—" if math.isnan(x) else f"{x / H:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--leaf", type=int, default=8)
    ap.add_argument("--policies", default="fifo,slurm,tiresias,themis,pollux,default")
    ap.add_argument("--elastic", action="store_true")
    ap.add_argument("--cycle-s", type=float, default=0.0)
    ap.add_argument("--max-pending", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=1, help="replays run at once (processes)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    trace = read_philly(args.trace or default_dir())
    read_s = time.perf_counter() - t0
    jobs = list(trace.jobs[: args.limit] if args.limit else trace.jobs)
    if args.elastic:
        jobs = make_elastic(jobs)
    fabric = fabric_from_shape(args.nodes, args.gpus_per_node, args.leaf)
    gpus = args.nodes * args.gpus_per_node
    runs: list[RunResult] = []
    decide_s: dict[str, float] = {}
    names = args.policies.split(",")
    started = time.perf_counter()
    _SHARED.update(jobs=jobs, fabric=fabric)
    if args.jobs > 1:  # fork: the workers inherit the trace and the decide() timer
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork")) as ex:
            futures = [ex.submit(_replay, n, args.cycle_s, args.max_pending) for n in names]
            done = [f.result() for f in futures]
    else:
        done = [_replay(n, args.cycle_s, args.max_pending) for n in names]
    total_s = time.perf_counter() - started
    cpu_s: dict[str, float] = {}
    for run, core_s, cpu in done:
        runs.append(run)
        decide_s[run.policy] = core_s
        cpu_s[run.policy] = cpu

    print(f"{len(jobs):,} jobs (trace read in {read_s:.2f} s), {gpus} GPUs = {args.nodes} nodes x "
          f"{args.gpus_per_node}, {args.leaf} nodes per leaf"
          + (", multi-GPU jobs elastic in [1, requested] replicas" if args.elastic else "")
          + (f", cycle quantum {args.cycle_s:g} s" if args.cycle_s else "")
          + (f", at most {args.max_pending} pending jobs per cycle" if args.max_pending else "")
          + f"; Python {platform.python_version()}; all replays {total_s:.1f} s wall with "
          f"--jobs {args.jobs}, load average {os.getloadavg()[0]:.1f}\n")
    print("| policy | done | mean JCT h | median h | p95 h | p99 h | mean queue h | makespan h "
          "| util alloc | util prod | ρ mean | ρ max | ρ>2 | preempt | resizes | GPU-h lost |")
    print("|---" * 16 + "|")
    for run in runs:
        m = run.metrics
        print(f"| {run.policy} | {m.finished}/{m.jobs} | {h(m.mean_jct_s)} | {h(m.median_jct_s)} "
              f"| {h(m.p95_jct_s)} | {h(m.p99_jct_s)} | {h(m.mean_queueing_s)} | "
              f"{h(m.makespan_s)} | {100 * m.util_allocated:.1f}% | "
              f"{100 * m.util_productive:.1f}% | {m.rho_mean:.2f} | {m.rho_max:.2f} | "
              f"{100 * m.rho_share_above_2:.1f}% | {m.preemptions} | {m.resizes} | "
              f"{m.gpu_hours_lost_to_preemption:,.0f} |")
    metrics = {r.policy: r.metrics for r in runs}
    for base in ("fifo", "slurm"):
        if base not in metrics:
            continue
        print(f"\nRatios vs {base} (< 1 is better except utilisation):\n")
        print("| policy | mean JCT | median JCT | p99 JCT | mean queue | max ρ | util alloc |")
        print("|---" * 7 + "|")
        for name, row in ratios(metrics, base).items():
            cells = " | ".join("—" if math.isnan(v) else f"{v:.2f}×" for v in row.values())
            print(f"| {name} | {cells} |")
    print("\nSimulator speed (this machine, one process):\n")
    print("| policy | cycles | idle (skipped) | events | wall s | CPU s | in decide() s | simulator s "
          "| jobs/s (CPU) | extrapolated 100k jobs CPU s |")
    print("|---" * 10 + "|")
    for run in runs:
        rate = len(jobs) / max(cpu_s[run.policy], 1e-9)  # CPU: the machine may be shared
        core = decide_s[run.policy]
        print(f"| {run.policy} | {run.cycles:,} | {getattr(run, 'skipped', 0):,} | {run.events:,} | "
              f"{run.wall_s:.1f} | {cpu_s[run.policy]:.1f} | {core:.1f} | {run.wall_s - core:.1f} | {rate:,.0f} | {100_000 / rate:.0f} |")


if __name__ == "__main__":
    main()
