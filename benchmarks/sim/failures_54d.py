"""Issue 20's measurement: one 16,000-GPU training job beside a background of smaller jobs on a
16,384-GPU fleet (2,048 nodes x 8, leaves of 32), failures at Llama 3's rate, 54 simulated days.

    .venv/bin/python -m benchmarks.sim.failures_54d [--days 54] [--nodes 2048] [--big-gpus 16000]
        [--scenarios naive,advised,...] [--seed 0] [--json OUT]

Every scenario replays the same trace through the real decision core (``simulate``) with the
same failure process (``railgang sim --failures llama3``: seeded per node and leaf, so every
scenario meets the same faults while it has work running). Reported per scenario:

- **effective training time** of the big job: training work done (seconds at its full size, less
  the checkpoints' share) / wall time since it was submitted;
- its failures, restarts and the GPU-hours it did not train (16,000 x wall - useful);
- **background mean JCT** (hours) of the small jobs that finished, and how many finished;
- GPU-hours lost over all jobs (rolled-back work + restores: ``JobRecord.lost_gpu_s``).

A smaller fleet keeps the shape: ``--nodes 256 --big-gpus 2000`` is the same job-to-fleet ratio
(the failure rates are per GPU, node and leaf, so the big job's MTBF grows 8x).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from railgang.daemon.core import PriorityClass
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.spares import SpareRules
from railgang.daemon.core.policies import registry
from railgang.daemon.failures.rates import parse_failures
from railgang.daemon.failures.young_daly import young_daly_s
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.sim.config import SimConfig
from railgang.daemon.sim.engine import Bounds, EngineConfig, RunResult, simulate
from railgang.daemon.sim.failures import FailureConfig
from railgang.daemon.sim.progress import NoComm
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

DAY = 86400.0
BIG = "big"


@dataclass(frozen=True)
class Scenario:
    name: str
    policy: str
    interval: str  # "fixed" or "advised"
    fixed_s: float  # the interval when fixed
    detect_s: float  # fault -> kill
    what: str
    spares: bool = False  # hot spares (core/model/spares.py) from --spares-*


SCENARIOS = {
    "naive": Scenario("naive", "slurm", "fixed", 1800.0, 300.0,
                      "Slurm-like multifactor+backfill; 30 min checkpoints; a dead node noticed "
                      "after SlurmdTimeout (300 s)"),
    "naive-advised": Scenario("naive-advised", "slurm", "advised", 0.0, 300.0,
                              "as naive, checkpoint interval Young-Daly"),
    "railgang-fixed": Scenario("railgang-fixed", "default", "fixed", 1800.0, 60.0,
                               "railgang default policy, 30 min checkpoints, fault seen in 60 s"),
    "railgang": Scenario("railgang", "default", "advised", 0.0, 60.0,
                         "railgang default policy, Young-Daly checkpoints, fault seen in 60 s"),
    "railgang-spares": Scenario("railgang-spares", "default", "advised", 0.0, 60.0,
                                "as railgang, with hot spares (--spares-per-leaf ...)", True),
}


def background(gpus_free: int, days: float, load: float, seed: int,
               time_limits: bool = False) -> list[TraceJob]:
    """Small class-3 jobs (8-64 GPUs, log-normal 2 h median, clipped to [10 min, 24 h]) arriving
    as a Poisson process at ``load`` of the GPUs the big job leaves. ``time_limits``: each asks
    for its run time rounded up to the next hour (a user's --time; hot spares lend nodes only to
    work whose limit is short)."""
    rng = random.Random(f"background:{seed}")
    sizes, weights = [8, 16, 32, 64], [50, 25, 15, 10]
    mean_gpu_s = 0.0
    draws = []
    for _ in range(20000):
        g = rng.choices(sizes, weights)[0]
        d = min(max(rng.lognormvariate(math.log(7200.0), 1.0), 600.0), DAY)
        draws.append((g, d))
        mean_gpu_s += g * d
    mean_gpu_s /= len(draws)
    gap = mean_gpu_s / (load * gpus_free)
    jobs, t = [], 60.0
    for i, (g, d) in enumerate(draws):
        t += rng.expovariate(1.0 / gap)
        if t >= days * DAY:
            break
        limit = math.ceil(d / 3600.0) * 3600.0 if time_limits else None
        jobs.append(TraceJob(f"bg{i:05d}", t, g, d, account="research", tp=8 if g >= 8 else 1,
                             time_limit_s=limit))
    return jobs


def replay(s: Scenario, args: argparse.Namespace, jobs: list[TraceJob], fabric: Any) -> dict[str, Any]:
    rates = parse_failures(args.failures)
    sim = SimConfig(checkpoint_interval_s=s.fixed_s or 1800.0, checkpoint_cost_s=args.ckpt_cost_s,
                    restore_cost_s=args.restart_s)
    cycle = CycleConfig(spares=SpareRules(per_leaf=args.spares_per_leaf,
                                          min_gang_gpus=args.spares_min_gpus,
                                          lend_max_s=args.spares_lend_s)) if s.spares else None
    config = EngineConfig(sim=sim, seed=args.seed, cycle=cycle, failures=FailureConfig(
        rates=rates, seed=args.seed, detect_s=s.detect_s, interval=s.interval))  # type: ignore[arg-type]
    bounds = Bounds(until=args.days * DAY)
    waits: list[float] = []
    down_since: list[float] = []
    backend: list[SimBackend] = []

    def watch(now: float, b: SimBackend) -> None:  # the big job's waits for nodes after a kill
        if not backend:
            backend.append(b)
        running = BIG in b.running
        if not running and not down_since and BIG in b.jobs and b.jobs[BIG].record.start is not None:
            down_since.append(now)
        elif running and down_since:
            waits.append(now - down_since.pop())

    cpu0 = time.process_time()
    run = simulate(jobs, registry.get(s.policy), fabric, config=config, comm=NoComm(),
                   observer=watch, bounds=bounds)
    row = summarise(s, run, backend[0], args.days * DAY, time.process_time() - cpu0, args)
    waits.sort()
    row["big_wait_s"] = {"n": len(waits), "mean": round(sum(waits) / len(waits), 1) if waits else 0,
                         "max": round(waits[-1], 1) if waits else 0}
    return row


def summarise(s: Scenario, run: RunResult, b: SimBackend, end: float, cpu: float,
              args: argparse.Namespace) -> dict[str, Any]:
    assert run.failures is not None
    f = run.failures
    sj = b.jobs.get(BIG)
    rec = next(r for r in run.records if r.job_id == BIG)
    useful_s = 0.0
    interval = None
    if sj is not None:
        sj.advance(end)
        # the backend's work counts checkpoints (inflated by 1 / share): training is the share
        share = f.useful_share(BIG)
        useful_s = (sj.tj.duration_s / share - sj.remaining) * share
        interval = sj.request.checkpoint_interval_s
    wall = end  # the big job was submitted at 0
    jct = [r.finish - r.submit for r in run.records if r.job_id != BIG and r.finish is not None]
    big_hits = sum(1 for x in f.log if BIG in x.jobs)
    lost = sum(r.lost_gpu_s for r in run.records)
    return {
        "scenario": s.name, "policy": s.policy, "what": s.what,
        "checkpoint_interval_s": round(interval, 1) if interval else None,
        "effective_training": round(useful_s / wall, 4),
        "big_failures": big_hits, "failures": len(f.log),
        "leaf_failures": sum(1 for x in f.log if len(x.nodes) > 1),
        "big_gpu_h_not_training": round(args.big_gpus * (wall - useful_s) / 3600),
        "background_finished": len(jct),
        "background_mean_jct_h": round(sum(jct) / len(jct) / 3600, 3) if jct else None,
        "gpu_h_lost": round(lost / 3600),
        "node_h_out": round(f.node_s_out / 3600),
        "cycles": run.cycles, "events": run.events, "cpu_s": round(cpu, 1),
        "big_preempt_or_kill": rec.preemptions,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--days", type=float, default=54.0)
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--leaf", type=int, default=32)
    ap.add_argument("--big-gpus", type=int, default=16000)
    ap.add_argument("--load", type=float, default=0.7, help="background offered load")
    ap.add_argument("--failures", default="llama3")
    ap.add_argument("--ckpt-cost-s", type=float, default=10.0)
    ap.add_argument("--restart-s", type=float, default=120.0)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limits", action="store_true",
                    help="background jobs ask for their run time rounded up to the hour")
    ap.add_argument("--spares-per-leaf", type=int, default=1, help="railgang-spares: idle nodes "
                    "kept per leaf of a large gang")
    ap.add_argument("--spares-min-gpus", type=int, default=1024,
                    help="railgang-spares: gangs of at least this many GPUs get spares")
    ap.add_argument("--spares-lend-s", type=float, default=3600.0,
                    help="railgang-spares: spares are lent to class-3 work whose limit is this short")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    fabric = fabric_from_shape(args.nodes, 8, args.leaf)
    free = args.nodes * 8 - args.big_gpus
    big = TraceJob(BIG, 0.0, args.big_gpus, 1000 * DAY, account="pretrain", tp=8,
                   priority_class=PriorityClass.PRODUCTION)
    jobs = [big, *background(free, args.days, args.load, args.seed, args.time_limits)]
    rates = parse_failures(args.failures)
    nodes = math.ceil(args.big_gpus / 8)
    mtbf = rates.mtbf_s(nodes, 8, math.ceil(nodes / args.leaf))
    print(f"fleet {args.nodes} nodes x 8 GPUs, leaves of {args.leaf}; big job {args.big_gpus} "
          f"GPUs (MTBF {mtbf / 3600:.2f} h, Young-Daly {young_daly_s(args.ckpt_cost_s, mtbf):.0f} s "
          f"at {args.ckpt_cost_s:g} s per checkpoint); {len(jobs) - 1} background jobs at load "
          f"{args.load} of {free} GPUs; {args.days:g} days; failures {args.failures} "
          f"({rates.fleet_per_h(args.nodes, 8, args.leaf) * 24 * args.days:.0f} expected); "
          f"restart {args.restart_s:g} s; Python {platform.python_version()}; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    rows = []
    for name in args.scenarios.split(","):
        row = replay(SCENARIOS[name], args, jobs, fabric)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)},
                                         "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
