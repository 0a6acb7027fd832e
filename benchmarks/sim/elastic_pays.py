"""Rigid vs ``--elastic`` per policy on the same trace, with where the elastic run loses (issue 12.4).

    .venv/bin/python -m benchmarks.sim.elastic_pays [--trace PATH] [--limit N] [--nodes 8
        --gpus-per-node 8 --leaf 4] [--policies default,pollux] [--synthetic N [--seeds K]]

For each policy: one rigid and one elastic replay (every multi-GPU job elastic in [1, requested]
replicas, as ``railgang sim --elastic``). Prints Markdown: mean JCT, productive utilisation,
makespan, resizes, GPU-hours lost to resize transitions (GPUs held × transition time), GPU-hours
lost to preemption, and how many jobs started below their requested size (and of those, how
many on a curve that is super-linear up to the requested size: started there, they waste GPUs).
``--synthetic N`` replays a seeded synthetic trace of N jobs with the three curve shapes instead;
with ``--seeds K`` it replays seeds 1..K and prints, per policy, on how many seeds the elastic run
beats the rigid one on each goal and the geometric mean of elastic/rigid (one seed is one draw of
a chaotic system: moving a few starts moves where later 16-GPU gangs land, and their placement
factor alone shifts the mean JCT by tens of per cent either way).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.accounting import SimJob
from railgang.daemon.sim.engine import simulate
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.replay import make_elastic
from railgang.daemon.sim.traces.model import TraceJob
from railgang.daemon.sim.traces.philly import default_dir, read_philly
from railgang.topology.fabric import fabric_from_shape

H = 3600.0
_COUNT: dict[str, float] = {}
_resized, _begin = SimJob.resized, SimJob.begin_run


def _counting_resized(self: SimJob, now: float) -> None:  # measurement only
    _COUNT["resize_gpu_s"] += self.gpus * self.request.transition_cost_s
    _resized(self, now)


def _counting_begin(self: SimJob, now: float) -> None:  # measurement only
    req = self.request
    if self.replicas < req.replicas:
        _COUNT["small_starts"] += 1
        k, n = self.replicas, req.replicas
        if req.speedup(n) / n > req.speedup(k) / k * 1.001:  # per-GPU rate higher at full size
            _COUNT["superlinear_small"] += 1
    _begin(self, now)


SimJob.resized = _counting_resized  # type: ignore[method-assign]
SimJob.begin_run = _counting_begin  # type: ignore[method-assign]


def synthetic(n: int, gpus: int, seed: int = 1) -> list[TraceJob]:
    """Seeded jobs of 1-16 GPUs with super-linear, linear and saturating measured curves,
    Poisson arrivals at about 90 % offered load."""
    rng = random.Random(seed)
    shapes: dict[str, Callable[[int], float]] = {  # throughput per GPU count (relative), the three regimes of the Philly table
        "super": lambda g: g ** 1.15,
        "linear": lambda g: float(g),
        "saturating": lambda g: g / (1.0 + 0.08 * (g - 1)),
    }
    jobs, t = [], 0.0
    sizes = (1, 2, 4, 8, 16)
    mean_dur = 4 * H
    mean_gpus = sum(sizes) / len(sizes)
    gap = mean_dur * mean_gpus / (0.9 * gpus)
    for i in range(n):
        t += rng.expovariate(1.0 / gap)
        g = rng.choice(sizes)
        shape = rng.choice(sorted(shapes))
        thr = {k: shapes[shape](k) for k in (1, 2, 4, 8, 16) if k <= g}
        jobs.append(TraceJob(job_id=f"s{i:05d}", submit_time=t, gpus=g,
                             duration_s=rng.lognormvariate(0, 1.0) * mean_dur / 1.65,
                             account=f"vc{i % 4}", model=shape, throughput_by_gpus=thr))
    return jobs


def run(jobs: list[TraceJob], name: str, fabric: Any) -> dict[str, float]:
    _COUNT.update(resize_gpu_s=0.0, small_starts=0, superlinear_small=0)
    m = simulate(jobs, get(name), fabric, comm=TopologyComm(fabric)).metrics
    return {"jct": m.mean_jct_s / H, "prod": 100 * m.util_productive, "alloc": 100 * m.util_allocated,
            "makespan": m.makespan_s / H, "resizes": m.resizes,
            "resize_h": _COUNT["resize_gpu_s"] / H, "preempt_h": m.gpu_hours_lost_to_preemption,
            "small": _COUNT["small_starts"], "super": _COUNT["superlinear_small"],
            "done": m.finished}


def seeds(n: int, k: int, gpus: int, policies: list[str], fabric: Any) -> None:
    """Rigid vs elastic on synthetic seeds 1..k: wins per goal and geometric-mean ratios."""
    print("| policy | seeds | elastic wins: mean JCT / util prod / makespan | elastic/rigid JCT "
          "(geo. mean) | util prod, points (mean) | elastic/rigid makespan (geo. mean) |")
    print("|---" * 6 + "|")
    for name in policies:
        wins, jct, util, span = [0, 0, 0], 0.0, 0.0, 0.0
        for seed in range(1, k + 1):
            jobs = synthetic(n, gpus, seed)
            r = run([dataclasses.replace(j) for j in jobs], name, fabric)
            e = run([dataclasses.replace(j) for j in make_elastic(jobs)], name, fabric)
            for i, won in enumerate((e["jct"] < r["jct"], e["prod"] > r["prod"],
                                     e["makespan"] < r["makespan"])):
                wins[i] += won
            jct += math.log(e["jct"] / r["jct"])
            util += e["prod"] - r["prod"]
            span += math.log(e["makespan"] / r["makespan"])
        print(f"| {name} | {k} | {wins[0]} / {wins[1]} / {wins[2]} | {math.exp(jct / k):.3f} | "
              f"{util / k:+.2f} | {math.exp(span / k):.3f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--leaf", type=int, default=4)
    ap.add_argument("--policies", default="default,pollux")
    ap.add_argument("--synthetic", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=0, help="with --synthetic: seeds 1..K, summary")
    args = ap.parse_args()
    gpus = args.nodes * args.gpus_per_node
    if args.synthetic and args.seeds:
        seeds(args.synthetic, args.seeds, gpus, args.policies.split(","),
              fabric_from_shape(args.nodes, args.gpus_per_node, args.leaf))
        return
    if args.synthetic:
        rigid = synthetic(args.synthetic, gpus)
    else:
        rigid = list(read_philly(args.trace or default_dir()).jobs)
        rigid = rigid[: args.limit] if args.limit else rigid
    fabric = fabric_from_shape(args.nodes, args.gpus_per_node, args.leaf)
    first = min(j.submit_time for j in rigid)
    bound = max(j.submit_time + j.duration_s for j in rigid) - first
    print(f"{len(rigid):,} jobs on {gpus} GPUs ({args.nodes} x {args.gpus_per_node}, leaf "
          f"{args.leaf}); makespan lower bound (a job's arrival + its run at full size, "
          f"latest): {bound / H:.1f} h\n")
    print("| policy | run | done | mean JCT h | util prod | util alloc | makespan h | resizes "
          "| GPU-h lost to resizes | GPU-h lost to preemption | started small (super-linear) |")
    print("|---" * 11 + "|")
    for name in args.policies.split(","):
        for label, jobs in (("rigid", rigid), ("elastic", make_elastic(rigid))):
            r = run([dataclasses.replace(j) for j in jobs], name, fabric)
            print(f"| {name} | {label} | {r['done']} | {r['jct']:.2f} | {r['prod']:.1f}% | "
                  f"{r['alloc']:.1f}% | {r['makespan']:.1f} | {r['resizes']:.0f} | "
                  f"{r['resize_h']:.1f} | {r['preempt_h']:.1f} | {r['small']:.0f} "
                  f"({r['super']:.0f}) |", flush=True)


if __name__ == "__main__":
    main()
