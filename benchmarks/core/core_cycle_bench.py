"""One decision cycle: 1,000 pending jobs on a 10,000-GPU cluster (1,250 nodes × 8), per policy.

    .venv/bin/python -m benchmarks.core.core_cycle_bench [--runs 5] [--pending 1000] [--nodes 1250]

The cluster is ~90 % busy (running jobs of Philly-like sizes, first-fit packed, leaving free GPUs
scattered over many nodes); the queue mixes sizes 1-64 GPUs, TP 1/8, ~20 % elastic, classes 1-3,
known work. Placement goes through the real ``railgang.topology.placement.place``. Prints the median and
max wall time of ``decide`` per policy plus the number of starts/preemptions/resizes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from railgang.daemon.core import (
    Job,
    JobRequest,
    JobState,
    Node,
    Preempt,
    Resize,
    RunningJob,
    Start,
    amdahl,
    decide,
    make_snapshot,
    topology_placer,
)
from railgang.daemon.core.model.job import PriorityClass
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies.registry import get, names

SIZES = [1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 16, 32, 64]


def build(nodes: int, pending: int, busy: float, seed: int = 1) -> Snapshot:
    from railgang.topology.fabric import fabric_from_shape

    rng = random.Random(seed)
    fabric = fabric_from_shape(nodes, 8, 4)
    names_ = list(fabric.nodes)
    now = 1_000_000.0
    free = {n: list(range(8)) for n in names_}
    order = list(names_)
    running = []
    target_busy = int(busy * nodes * 8)
    used, i = 0, 0
    while used < target_busy:
        g = rng.choice(SIZES)
        tp = 8 if g >= 8 and rng.random() < 0.5 else 1
        elastic = g >= 2 and rng.random() < 0.2
        j = Job(JobRequest(f"r{i:05d}", g, account=rng.choice("abcd"),
                           submit_time=now - rng.uniform(1e3, 1e5), tp=tp,
                           elastic_min=1 if elastic else None,
                           elastic_max=g // tp * 2 if elastic else None,
                           priority_class=PriorityClass(rng.choice([1, 2, 3, 3, 3])), speedup_fn=amdahl(0.05)),
                JobState(work_remaining_s=rng.uniform(600, 2e5), attained_gpu_s=rng.uniform(0, 1e6)))
        # scatter: pick a random node with room for whole TP groups, first-fit from there
        start = rng.randrange(len(order))
        assign: dict[str, tuple[int, ...]] = {}
        need = g
        for k in range(len(order)):
            n = order[(start + k) % len(order)]
            take = min(need, len(free[n]) // tp * tp)
            if take:
                assign[n] = tuple(free[n][:take])
                free[n] = free[n][take:]
                need -= take
            if not need:
                break
        if need:
            break
        running.append(RunningJob(j, assign, now - rng.uniform(1e3, 5e4), j.replicas))
        used += g
        i += 1
    queue = []
    for k in range(pending):
        g = rng.choice(SIZES)
        tp = 8 if g >= 8 and rng.random() < 0.5 else 1
        elastic = g >= 2 and rng.random() < 0.2
        queue.append(Job(
            JobRequest(f"p{k:05d}", g, account=rng.choice("abcd"),
                       submit_time=now - rng.uniform(0, 5e4), tp=tp,
                       elastic_min=1 if elastic else None,
                       elastic_max=g // tp * 2 if elastic else None,
                       priority_class=PriorityClass(rng.choice([1, 2, 3, 3, 3, 3])), speedup_fn=amdahl(0.05)),
            JobState(work_remaining_s=rng.uniform(600, 2e5),
                     attained_gpu_s=rng.choice([0.0, 0.0, 5e3, 5e4, 5e5]))))
    return make_snapshot(now=now, fabric=fabric, nodes=[Node(n, 8) for n in names_],
                         free={n: g for n, g in free.items() if g}, running=running, pending=queue)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pending", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--busy", type=float, default=0.9)
    ap.add_argument("--policy", action="append")
    args = ap.parse_args()
    snap = build(args.nodes, args.pending, args.busy)
    print(f"cluster {args.nodes}x8 = {snap.total_gpus} GPUs, {len(snap.running)} running, "
          f"{snap.free_gpus} free on {len(snap.free)} nodes, {len(snap.pending)} pending")
    print("| policy | median ms | max ms | in place() ms | place() calls | starts | preempts | resizes |")
    print("|---|---|---|---|---|---|---|---|")
    spent = {"s": 0.0, "n": 0}

    def timed(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return topology_placer(*a, **k)
        finally:
            spent["s"] += time.perf_counter() - t
            spent["n"] += 1

    for name in args.policy or names():
        policy = get(name)
        times, inside = [], []
        for r in range(args.runs):
            spent.update(s=0.0, n=0)
            t = time.perf_counter()
            d = decide(snap, policy, snap.now, random.Random(r), placer=timed)
            times.append((time.perf_counter() - t) * 1e3)
            inside.append(spent["s"] * 1e3)
        count = {k: sum(isinstance(a, k) for a in d.actions) for k in (Start, Preempt, Resize)}
        print(f"| {name} | {statistics.median(times):.1f} | {max(times):.1f} | "
              f"{statistics.median(inside):.1f} | {spent['n']} | {count[Start]} | {count[Preempt]} | "
              f"{count[Resize]} |")


if __name__ == "__main__":
    main()
