"""How replay time grows with trace size: synthetic Philly-like traces at 80 % load on 1,024 GPUs.

    .venv/bin/python -m benchmarks.sim.sim_scale [--sizes 10000,100000] [--policy default]
        [--nodes 128 --gpus-per-node 8 --leaf 8] [--load 0.8] [--seed 0] [--cycle-s 0]
        [--shape philly|gangs|small|diurnal]
        [--profile FILE]

Per size: generate the trace (``benchmarks/sim/synthetic_trace.py``), write it as CSV, read it back
with the simulator's CSV reader, replay it once, and print one Markdown row with the wall time
and where it went (phase columns are wall seconds; ``CPU s`` is this process's CPU time, the
fairer figure on a shared machine): ``snapshot`` (the backend's snapshot build), the core's ``decide()`` phases
(observe, order, size, place, preempt, migrate, grow, emit, from ``Decision.phase_ms``),
``apply`` (the backend carrying out actions), ``record`` (the per-cycle work-conservation
bookkeeping), ``metrics`` (the final metrics) and ``events`` (everything else: the heap, arrivals,
completions). ``--profile FILE`` writes a cProfile of the first size's replay.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import railgang.daemon.sim.engine as engine
from benchmarks.sim.synthetic_trace import SHAPES, generate, write_csv
from railgang.daemon.core.cycle import PHASES
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.recorder import Recorder
from railgang.daemon.sim.traces.csv_trace import read_csv
from railgang.topology.fabric import fabric_from_shape

_MS: defaultdict[str, float] = defaultdict(float)
# the engine's own names, not its API: patched below to time them
_ENGINE = vars(engine)
_run_cycle, _compute, _rec_cycle = _ENGINE["run_cycle"], _ENGINE["compute"], Recorder.cycle


def _timed_run_cycle(*args: Any, **kwargs: Any) -> Any:
    t = time.perf_counter()
    out = _run_cycle(*args, **kwargs)
    _MS["cycle"] += (time.perf_counter() - t) * 1e3
    for k, v in out.timings.items():
        _MS[k] += v
    return out


def _timed(counter: str, fn: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _MS[counter] += (time.perf_counter() - t) * 1e3
    return wrapper


# measurement only: wrap the seams the replay goes through (no schedule depends on them)
_ENGINE["run_cycle"] = _timed_run_cycle
_ENGINE["compute"] = _timed("metrics", _compute)
Recorder.cycle = _timed("record", _rec_cycle)  # type: ignore[method-assign]

COLUMNS = ("snapshot", *PHASES, "apply", "record", "metrics", "events")


def replay(n: int, args: argparse.Namespace, tmp: Path, profile: Path | None) -> dict[str, Any]:
    gpus = args.nodes * args.gpus_per_node
    path = tmp / f"syn{n}.csv"
    write_csv(generate(n, gpus_total=gpus, load=args.load, seed=args.seed, shape=args.shape), path)
    trace = read_csv(path)
    fabric = fabric_from_shape(args.nodes, args.gpus_per_node, args.leaf)
    _MS.clear()
    prof = cProfile.Profile() if profile is not None else None
    t, cpu = time.perf_counter(), time.process_time()
    if prof is not None:
        prof.enable()
    run = simulate(trace.jobs, get(args.policy), fabric, comm=TopologyComm(fabric),
                   config=EngineConfig(cycle_s=args.cycle_s, max_pending=args.max_pending))
    if prof is not None:
        prof.disable()
        prof.dump_stats(str(profile))
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    ms = dict(_MS)
    inside = ms.get("cycle", 0.0) - sum(ms.get(k, 0.0) for k in ("snapshot", *PHASES, "apply"))
    ms["events"] = wall * 1e3 - ms.get("cycle", 0.0) - ms.get("record", 0.0) - ms.get("metrics", 0.0)
    ms["apply"] = ms.get("apply", 0.0) + max(inside, 0.0)  # run_cycle's own glue counts as apply
    m = run.metrics
    return {"n": n, "wall": wall, "cpu": cpu, "cycles": run.cycles, "skipped": run.skipped, "events": run.events, "ms": ms,
            "done": m.finished, "mean_jct_h": m.mean_jct_s / 3600}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--policy", default="default")
    ap.add_argument("--nodes", type=int, default=128)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--leaf", type=int, default=8)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="philly")  # synthetic_trace.SHAPES
    ap.add_argument("--cycle-s", type=float, default=0.0)
    ap.add_argument("--max-pending", type=int, default=None)
    ap.add_argument("--profile", type=Path, default=None)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"policy {args.policy}, {args.nodes * args.gpus_per_node} GPUs, load {args.load}, "
          f"seed {args.seed}, shape {args.shape}, cycle quantum {args.cycle_s:g} s; Python "
          f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f}\n")
    print("| jobs | wall s | CPU s | jobs/s (CPU) | cycles (idle, skipped) | events | mean JCT h | "
          + " | ".join(f"{c} s" for c in COLUMNS) + " |")
    print("|---" * (7 + len(COLUMNS)) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for i, n in enumerate(sizes):
            r = replay(n, args, Path(tmp), args.profile if i == 0 else None)
            cells = " | ".join(f"{r['ms'].get(c, 0.0) / 1e3:.1f}" for c in COLUMNS)
            print(f"| {n:,} | {r['wall']:.1f} | {r['cpu']:.1f} | {n / r['cpu']:,.0f} | {r['cycles']:,} ({r['skipped']:,}) | "
                  f"{r['events']:,} | {r['mean_jct_h']:.2f} | {cells} |", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
