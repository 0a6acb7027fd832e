"""Placement over time: a job stream on 64 nodes x 8 GPUs (8 leaves of 8 under one spine), the setup
of shared/notes/plain-slurm-placement.md, placed by railgang vs Slurm 22.05 cons_tres + topology/tree (benchmarks/baselines/slurm_tree.py).

Both use the same queue policy (FIFO order, any job that fits starts: backfill without
reservations), so the only difference is *where* each job goes. Run by topology_bench.py, or alone:

    .venv/bin/python -m benchmarks.topology.topology_stream
"""

from __future__ import annotations

import heapq
import random
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from benchmarks.baselines.slurm_tree import slurm_tree_place
from railgang.topology.fabric import Fabric, fabric_from_shape
from railgang.topology.placement import GangRequest, Placement, place

Placer = Callable[[Fabric, Mapping[str, frozenset[int]], GangRequest], Placement | None]


@dataclass(frozen=True)
class Job:
    id: int
    arrival: float
    duration: float
    request: GangRequest

    @property
    def nodes(self) -> int:
        return self.request.gpus // 8 if self.request.tp == 8 else 0


def make_jobs(n: int, seed: int) -> list[Job]:
    """Half small jobs (1-2 GPUs), half whole-node gangs of 1/2/4/8 nodes; offered load ≈ 1.05."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(17.0)  # jobs per hour
        if rng.random() < 0.5:
            req = GangRequest(rng.choice([1, 2]))
        else:
            req = GangRequest(8 * rng.choice([1, 2, 4, 8]), tp=8)
        jobs.append(Job(i, t, rng.expovariate(1 / 2.0), req))
    return jobs


def replay(fabric: Fabric, jobs: list[Job], placer: Placer) -> dict[str, float]:
    free = {n: set(range(8)) for n in fabric.nodes}
    events: list[tuple[float, int, int]] = [(j.arrival, 1, j.id) for j in jobs]  # kind 0 = end, 1 = arrival
    heapq.heapify(events)
    queue: list[Job] = []
    held: dict[int, Mapping[str, tuple[int, ...]]] = {}
    leaves: dict[int, int] = {}
    waits: dict[int, float] = {}
    by_id = {j.id: j for j in jobs}
    now = 0.0
    while events:
        now, kind, jid = heapq.heappop(events)
        if kind == 0:
            for node, gpus in held.pop(jid).items():
                free[node].update(gpus)
        else:
            queue.append(by_id[jid])
        if events and events[0][0] == now:
            continue  # settle every event of this instant first
        snapshot = {n: frozenset(g) for n, g in free.items() if g}
        for job in list(queue):
            p = placer(fabric, snapshot, job.request)
            if p is None:
                continue
            queue.remove(job)
            held[job.id] = p.gpus
            for node, gpus in p.gpus.items():
                free[node].difference_update(gpus)
                snapshot = {n: frozenset(g) for n, g in free.items() if g}
            leaves[job.id] = len({fabric.leaf_of(n) for n in p.gpus})
            waits[job.id] = now - job.arrival
            heapq.heappush(events, (now + job.duration, 0, job.id))
    multi = [j for j in jobs if j.nodes > 1]
    eight = [j for j in jobs if j.nodes == 8]
    return {
        "one_leaf": sum(1 for j in multi if leaves[j.id] == 1) / len(multi),
        "leaves_8": statistics.mean(leaves[j.id] for j in eight),
        "wait_multi": statistics.mean(waits[j.id] for j in multi),
        "makespan": now,
    }


def railgang_placer(fabric: Fabric, free: Mapping[str, frozenset[int]], req: GangRequest) -> Placement | None:
    p = place(fabric, free, req)
    return p if isinstance(p, Placement) else None


def slurm_placer(fabric: Fabric, free: Mapping[str, frozenset[int]], req: GangRequest) -> Placement | None:
    return slurm_tree_place(fabric, free, req)  # Slurm 22.05 cons_tres + topology/tree


def stream(n_jobs: int = 300, seeds: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)) -> list[str]:
    fabric = fabric_from_shape(64, 8, nodes_per_leaf=8)
    rows = []
    for name, placer in (("railgang", railgang_placer), ("Slurm 22.05 cons_tres + topology/tree", slurm_placer)):
        runs = [replay(fabric, make_jobs(n_jobs, s), placer) for s in seeds]
        rows.append(f"| {name} | {statistics.mean(r['one_leaf'] for r in runs) * 100:.0f} % | "
                    f"{statistics.mean(r['leaves_8'] for r in runs):.2f} | "
                    f"{statistics.mean(r['wait_multi'] for r in runs):.2f} | "
                    f"{statistics.mean(r['makespan'] for r in runs):.1f} |")
    return [
        f"Job stream on 64 nodes x 8 GPUs (8 leaves of 8, one spine): {n_jobs} jobs, half 1-2 GPU jobs, "
        f"half whole-node gangs of 1/2/4/8 nodes, offered load ≈ 1.05, FIFO with backfill without "
        f"reservations for both; mean over seeds {', '.join(map(str, seeds))}:",
        "",
        "| placement | multi-node jobs inside one leaf | leaves per 8-node job | mean wait, multi-node (h) "
        "| makespan (h) |",
        "| --- | --- | --- | --- | --- |",
        *rows,
    ]


if __name__ == "__main__":
    for line in stream():
        print(line)
