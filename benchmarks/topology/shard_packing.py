"""Small work sharing GPUs (issue 19 item 6): where shard jobs land, and what it strands.

A stream of small jobs asking for Slurm ``shard`` GRES (1, 2 or 4 of a GPU's ``--shards``
slices; Poisson arrivals, exponential run times) on ``--nodes`` nodes of 8 GPUs, placed by
``railgang.topology.shards.place_shards`` with each strategy on the *same* stream:

- ``first_fit``: nodes in name order, the first GPU with room (select/cons_tres's order),
- ``spread``: the least loaded node (a balancing scheduler's default),
- ``pack``: railgang's best fit (a shared GPU with the fewest free shards that hold the job,
  then the node already holding the most shard work).

Sampled every 5 minutes over ``--days``: GPUs with any shard in use (lost to whole-GPU work),
the part of them beyond the fewest the shards in use need (*stranded*), GPUs with free shards
left, and nodes with any shard in use (lost to whole-node gangs); means over the samples, ranges
over ``--seeds`` streams.

    .venv/bin/python -m benchmarks.topology.shard_packing [--nodes 32] [--shards 4] [--load 0.1] [--days 7] [--seeds 5]
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import time

from railgang.topology.shards import STRATEGIES, Strategy, footprint, place_shards

SIZES = ((1, 0.5), (2, 0.3), (4, 0.2))  # shards asked, share of jobs
MEAN_RUN_S = 3600.0
SAMPLE_S = 300.0


def stream(seed: int, nodes: int, shards: int, load: float, days: float
           ) -> list[tuple[float, float, int]]:
    """(arrival, run time, shards) of every job: the mean shards in use are ``load`` of all."""
    rng = random.Random(seed)
    mean_need = sum(min(s, shards) * p for s, p in SIZES)
    rate = load * nodes * 8 * shards / (mean_need * MEAN_RUN_S)  # Little's law
    out: list[tuple[float, float, int]] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t > days * 86400:
            return out
        need = min(shards, rng.choices([s for s, _ in SIZES], [p for _, p in SIZES])[0])
        out.append((t, rng.expovariate(1 / MEAN_RUN_S), need))


def replay(jobs: list[tuple[float, float, int]], strategy: Strategy, nodes: int, shards: int,
           days: float) -> dict[str, float]:
    gpn = {f"n{i:03d}": 8 for i in range(nodes)}
    used: dict[str, dict[int, int]] = {}
    ends: list[tuple[float, str, int, int]] = []
    sums = {"gpus": 0.0, "stranded": 0.0, "partial": 0.0, "nodes": 0.0}
    samples, refused, next_sample = 0, 0, 0.0

    def sample_until(t: float) -> None:
        nonlocal samples, next_sample
        while next_sample <= min(t, days * 86400):
            fp = footprint(used, shards)
            sums["gpus"] += fp.gpus
            sums["stranded"] += fp.stranded_gpus
            sums["partial"] += fp.partial
            sums["nodes"] += fp.nodes
            samples += 1
            next_sample += SAMPLE_S

    for arrival, run, need in jobs:
        while ends and ends[0][0] <= arrival:
            t, node, gpu, n = heapq.heappop(ends)
            sample_until(t)
            used[node][gpu] -= n
        sample_until(arrival)
        slot = place_shards(used, gpn, shards, need, strategy)
        if slot is None:
            refused += 1
            continue
        used.setdefault(slot.node, {})
        used[slot.node][slot.gpu] = used[slot.node].get(slot.gpu, 0) + need
        heapq.heappush(ends, (arrival + run, slot.node, slot.gpu, need))
    sample_until(days * 86400)
    out = {k: v / max(1, samples) for k, v in sums.items()}
    out["free_nodes"] = nodes - out["nodes"]
    out["refused"] = refused
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--shards", type=int, default=4, help="shards per GPU (gres.conf Count / GPUs)")
    ap.add_argument("--load", type=float, default=0.1, help="mean share of all shards in use")
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    t0, c0 = time.time(), time.process_time()
    runs: dict[str, list[dict[str, float]]] = {s: [] for s in STRATEGIES}
    for seed in range(args.seeds):
        jobs = stream(seed, args.nodes, args.shards, args.load, args.days)
        for s in STRATEGIES:
            runs[s].append(replay(jobs, s, args.nodes, args.shards, args.days))
    print(f"{args.nodes} nodes x 8 GPUs x {args.shards} shards, load {args.load:.0%} of the "
          f"shards, {args.days:g} days, {args.seeds} seeds; means over 5-minute samples "
          f"(min-max over seeds)\n")
    print("| strategy | GPUs with shard work | stranded GPUs | GPUs partly free | nodes with "
          "shard work | whole nodes free | refused jobs |")
    print("|---|---|---|---|---|---|---|")
    for s in STRATEGIES:
        cells = []
        for key in ("gpus", "stranded", "partial", "nodes", "free_nodes", "refused"):
            vals = [r[key] for r in runs[s]]
            mean = sum(vals) / len(vals)
            cells.append(f"{mean:.1f} ({min(vals):.1f}-{max(vals):.1f})")
        print(f"| {s} | " + " | ".join(cells) + " |")
    print(f"\nwall {time.time() - t0:.1f} s, CPU {time.process_time() - c0:.1f} s, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
