"""A job stream on a GB200-style fleet: the wait of whole-rack gangs under railgang's placement
vs Slurm 24.11's own (transcribed) block placement, the same queue for both (issue 21 item 2).

16 NVL72 racks (288 nodes × 4 GPUs, ``BlockSizes=18,36,72,144,288``). Jobs arrive as a Poisson
stream from the NVL72-scaled mix of ``block_bench`` (1-72 whole nodes, TP 4-8), run for a
log-normal time (median 40 min), and are started by one simple queue for every placement:
in arrival order, each of the first ``--window`` waiting jobs that fits starts (backfill without
reservations, as Slurm's backfill does for jobs that fit now). Only the placement differs:
Slurm 24.11 on whole free nodes (``--nodes=N --gres=gpu:4``), the same with ``--segment`` from
the parallel shape, and railgang's ``place`` on the free GPUs. This measures placement alone:
railgang's daemon policies (leaf waits, preemption, defragmentation) are not in it.

    .venv/bin/python -m benchmarks.topology.block_stream --jobs 600 --load 0.9 --seed 0
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.baselines.slurm_block import BlockLayout, segment_size, slurm_block_nodes
from benchmarks.baselines.slurm_tree import ranks_in_order
from benchmarks.topology.block_bench import GPUS, MIX, PER_RACK, fleet
from railgang.topology.fabric import Fabric
from railgang.topology.placement import GangRequest, Placement, place

Placer = Callable[[dict[str, set[int]], "Job"], Placement | None]


@dataclass(frozen=True)
class Job:
    jid: int
    arrive: float
    run: float
    nodes: int
    tp: int
    pp: int


def draw_jobs(count: int, load: float, racks: int, seed: int) -> list[Job]:
    rng = random.Random(seed)
    weights = [w for *_, w in MIX]
    shapes = [m for m in MIX if m[0] <= racks * PER_RACK]
    mean_run = math.exp(math.log(2400) + 0.5)  # log-normal, median 40 min, sigma 1
    mean_nodes = sum(m[0] * w for m, w in zip(shapes, weights, strict=False)) / sum(weights[:len(shapes)])
    rate = load * racks * PER_RACK / (mean_nodes * mean_run)
    t, out = 0.0, []
    for j in range(count):
        t += rng.expovariate(rate)
        nodes, tp, pp, _ = rng.choices(shapes, weights[:len(shapes)])[0]
        out.append(Job(j, t, rng.lognormvariate(math.log(2400), 1.0), nodes, tp, pp))
    return out


def slurm_placer(layout: BlockLayout, with_segment: bool) -> Placer:
    def go(free: dict[str, set[int]], job: Job) -> Placement | None:
        usable = {n for n, g in free.items() if len(g) == GPUS}
        seg = segment_size(job.nodes, job.tp, job.pp, GPUS, PER_RACK) if with_segment else 0
        got = slurm_block_nodes(layout, usable, job.nodes, seg)
        return None if got is None else ranks_in_order([(n, g) for n in got for g in range(GPUS)], job.tp, job.pp)
    return go


def railgang_placer(fabric: Fabric) -> Placer:
    def go(free: dict[str, set[int]], job: Job) -> Placement | None:
        p = place(fabric, {n: frozenset(g) for n, g in free.items() if g},
                  GangRequest(job.nodes * GPUS, tp=job.tp, pp=job.pp), seed=job.jid)
        return p if isinstance(p, Placement) else None
    return go


def simulate(jobs: list[Job], fabric: Fabric, placer: Placer, window: int) -> dict[int, tuple[float, int, int, int]]:
    """job -> (wait in s, racks used, TP groups inside one NVLink domain, TP groups); jobs never
    started are left out."""
    free = {n: set(range(GPUS)) for n in fabric.nodes}
    events: list[tuple[float, int, int]] = [(j.arrive, 1, j.jid) for j in jobs]  # (time, kind, job)
    heapq.heapify(events)
    by_id = {j.jid: j for j in jobs}
    waiting: list[Job] = []
    running: dict[int, dict[str, tuple[int, ...]]] = {}
    out: dict[int, tuple[float, int, int, int]] = {}
    while events:
        now, kind, jid = heapq.heappop(events)
        if kind == 1:
            waiting.append(by_id[jid])
        else:
            for n, g in running.pop(jid).items():
                free[n].update(g)
        for job in list(waiting[:window]):
            p = placer(free, job)
            if p is None:
                continue
            for n, g in p.gpus.items():
                free[n].difference_update(g)
            running[job.jid] = dict(p.gpus)
            waiting.remove(job)
            groups: dict[tuple[int, int], set[str]] = {}
            for r in p.ranks:
                groups.setdefault((r.pp_stage, r.dp_rank), set()).add(fabric.domain_of(r.node))
            inside = sum(1 for d in groups.values() if len(d) == 1)
            out[job.jid] = (now - job.arrive, len({fabric.leaf_of(n) for n in p.gpus}), inside, len(groups))
            heapq.heappush(events, (now + job.run, 0, job.jid))
    return out


def report(jobs: list[Job], results: dict[str, dict[int, tuple[float, int, int, int]]]) -> str:
    classes: tuple[tuple[str, Callable[[Job], bool]], ...] = (
        ("< 18 nodes", lambda j: j.nodes < PER_RACK), ("18 nodes (a rack)", lambda j: j.nodes == PER_RACK),
        ("> 18 nodes", lambda j: j.nodes > PER_RACK))
    lines = ["| placement | " + " | ".join(f"{c} mean wait (min)" for c, _ in classes)
             + " | racks over the fewest (mean) | TP groups in one NVLink domain | started |", "| --- " * 7 + "|"]
    for name, res in results.items():
        cells = []
        for _, pick in classes:
            waits = [res[j.jid][0] / 60 for j in jobs if pick(j) and j.jid in res]
            cells.append(f"{statistics.fmean(waits):.1f} ({len(waits)})" if waits else "-")
        extra = [res[j.jid][1] - -(-j.nodes // PER_RACK) for j in jobs if j.jid in res]
        inside, groups = sum(r[2] for r in res.values()), sum(r[3] for r in res.values())
        lines.append(f"| {name} | {' | '.join(cells)} | {statistics.fmean(extra):.2f} | "
                     f"{100 * inside / max(groups, 1):.1f}% | {len(res)}/{len(jobs)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=600)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--window", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    fabric, layout = fleet(args.racks)
    jobs = draw_jobs(args.jobs, args.load, args.racks, args.seed)
    results: dict[str, dict[int, tuple[float, int, int, int]]] = {}
    t0 = time.monotonic()
    for name, placer in (("slurm 24.11", slurm_placer(layout, False)),
                         ("slurm 24.11 --segment", slurm_placer(layout, True)),
                         ("railgang", railgang_placer(fabric))):
        results[name] = simulate(jobs, fabric, placer, args.window)
    print(report(jobs, results))
    print(f"\n{args.racks} racks, {args.jobs} jobs, offered load {args.load}, window {args.window}, seed "
          f"{args.seed}; {time.monotonic() - t0:.0f} s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
