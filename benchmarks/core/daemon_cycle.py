"""The daemon's whole cycle against the simulator backend: 10,000 GPUs, 1,000 pending jobs.

    .venv/bin/python -m benchmarks.core.daemon_cycle [--nodes 1250] [--pending 1000] [--cycles 10]
                                                [--db sqlite|URL] [--policy default]

Everything the daemon does per cycle is timed, through ``DaemonService.run_once`` exactly as
``railgang daemon run`` calls it: observe (``snapshot``), reconcile the journal, the core's phases,
write the ``planned`` rows and commit, apply, write the outcomes and commit, record the per-job
explanations (only what changed) and close the cycle row. The cluster (1,250 nodes × 8 GPUs,
leaves of 8) is first filled by a burst cycle; then ``--cycles`` steady cycles run
10 s apart (simulated) with ~1,000 jobs waiting and jobs finishing and starting between them.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections import defaultdict

from railgang.daemon.clock import SimClock
from railgang.daemon.core.model.job import PriorityClass
from railgang.daemon.core.policies import registry
from railgang.daemon.service.cycle import CycleReport, DaemonService
from railgang.daemon.sim.live import LiveSim
from railgang.daemon.sim.traces.model import TraceJob
from railgang.db import migrate
from railgang.db.session import make_engine
from railgang.topology.fabric import fabric_from_shape

SIZES = [1, 1, 1, 2, 2, 4, 4, 8, 8, 8, 16, 16, 32]


def workload(gpus: int, pending: int, seed: int) -> list[TraceJob]:
    """Enough jobs to fill the cluster, then more, so that about ``pending`` wait once the burst
    cycle has packed what fits (placement leaves gaps that small jobs of the tail fill)."""
    rng = random.Random(seed)
    jobs: list[TraceJob] = []
    filled = 0
    while filled < gpus:
        g = rng.choice(SIZES)
        jobs.append(_job(rng, len(jobs), g, rng.uniform(60, 1800)))
        filled += g
    for _ in range(int(pending * 1.1)):
        jobs.append(_job(rng, len(jobs), rng.choice(SIZES), rng.uniform(600, 3600)))
    return jobs


def _job(rng: random.Random, i: int, gpus: int, duration: float) -> TraceJob:
    tp = min(gpus, 8) if rng.random() < 0.5 else 1
    return TraceJob(job_id=str(100000 + i), submit_time=i * 1e-3, gpus=gpus,
                    duration_s=round(duration), account=f"team-{i % 8}", tp=tp,
                    priority_class=PriorityClass(rng.choice((1, 2, 3, 3))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--pending", type=int, default=1000)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--policy", default="default")
    ap.add_argument("--db", default="sqlite", help="sqlite (a temporary file) or a database URL")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="rg-daemon-bench-")
    url = f"sqlite:///{tmp}/bench.sqlite" if args.db == "sqlite" else args.db
    migrate.upgrade(url)
    engine = make_engine(url)
    fabric = fabric_from_shape(args.nodes, 8, 8)
    jobs = workload(args.nodes * 8, args.pending, seed=1)
    clock = SimClock(10.0)  # every job has arrived
    sim = LiveSim(fabric, jobs, start=0.0)
    svc = DaemonService(engine=engine, backend=sim, policy=registry.get(args.policy),
                        clock=clock, leader="bench:0")
    t = time.perf_counter()
    burst = svc.run_once()
    print(f"{args.nodes * 8:,} GPUs, {len(jobs):,} jobs submitted, policy {args.policy}, {url}")
    _print("burst cycle", [burst], time.perf_counter() - t)
    steady: list[CycleReport] = []
    for _ in range(args.cycles):
        clock.advance(10.0)
        steady.append(svc.run_once())
    _print(f"steady cycles (median of {len(steady)})", steady, None)
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs")
    engine.dispose()


def _print(title: str, reports: list[CycleReport], wall: float | None) -> None:
    ms: dict[str, list[float]] = defaultdict(list)
    for r in reports:
        for k, v in r.timings_ms.items():
            ms[k].append(v)
    r0 = reports[-1]
    print(f"\n{title}: pending {statistics.median(r.pending for r in reports):.0f}, running "
          f"{statistics.median(r.running for r in reports):.0f}, actions "
          f"{statistics.median(sum(r.actions.values()) for r in reports):.0f} "
          f"(last: {dict(r0.actions)})" + (f", wall {wall:.2f} s" if wall else ""))
    for phase, values in ms.items():
        print(f"  {phase:<10} {statistics.median(values):9.1f} ms")


if __name__ == "__main__":
    main()
