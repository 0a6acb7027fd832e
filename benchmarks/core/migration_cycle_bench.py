"""What the migrate phase adds to one decision cycle at scale (issue 11 part 6).

10,000 GPUs (1,250 nodes × 8, 32 nodes per leaf, 8 leaves per spine), ~560 running 16-GPU gangs
on random node pairs (90 % of the nodes busy), 1,000 pending jobs; one ``decide`` with healthy
links and one with the first spine at 30 %: total milliseconds, the migrate phase's share, and
how many ``Migrate`` actions came out (``MigrationRules``: at most 8 jobs weighed, 4 moved).

    .venv/bin/python -m benchmarks.core.migration_cycle_bench
"""

from __future__ import annotations

import os
import random
import time

from railgang.daemon.core.cycle import CycleConfig, decide
from railgang.daemon.core.model.actions import Migrate
from railgang.daemon.core.model.job import Job, JobRequest, JobState, RunningJob
from railgang.daemon.core.model.snapshot import Node, make_snapshot
from railgang.daemon.core.policies import registry
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.health import LinkHealth


def main() -> int:
    fabric = fabric_from_shape(1250, 8, 32, 8)
    nodes = list(fabric.nodes)
    rng = random.Random(1)
    order = nodes[:]
    rng.shuffle(order)
    runs, used, i = [], set[str](), 0
    while len(used) < 0.9 * len(nodes) and i + 1 < len(order):
        a, b = order[i], order[i + 1]
        i += 2
        used |= {a, b}
        req = JobRequest(f"r{i:05d}", 16, tp=8, comm_fraction=0.3)
        runs.append(RunningJob(Job(req, JobState(work_remaining_s=rng.uniform(600, 36000))),
                               {a: tuple(range(8)), b: tuple(range(8))}, 0.0, 2))
    pending = [Job(JobRequest(f"p{k:05d}", rng.choice((8, 16, 32, 64)), tp=8, submit_time=k),
                   JobState(work_remaining_s=3600.0)) for k in range(1000)]
    free = {n: frozenset(range(8)) for n in nodes if n not in used}
    spine = next(s for s in fabric.switches if s.startswith("spine"))
    print("| links | running | pending | cycle ms | migrate phase ms | migrations |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, health in (("healthy", None), (f"{spine} at 30 %", LinkHealth(switches={spine: 0.3}))):
        snap = make_snapshot(now=7200.0, fabric=fabric, nodes=[Node(n, 8) for n in nodes], free=free,
                             running=runs, pending=pending, health=health)
        t = time.perf_counter()
        d = decide(snap, registry.get("default"), 7200.0, random.Random(0), config=CycleConfig())
        ms = (time.perf_counter() - t) * 1e3
        moved = sum(isinstance(a, Migrate) for a in d.actions)
        print(f"| {name} | {len(runs)} | {len(pending)} | {ms:.0f} | {d.phase_ms['migrate']:.0f} | {moved} |")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
