"""railgang's placement on NVLink blocks against Slurm 24.11's own (transcribed) block placement,
on the same occupancy states of a GB200-style fleet (issue 21 item 2).

Fleet: RACKS NVL72 racks of 18 nodes × 4 GPUs, one topology/block block per rack,
``BlockSizes=18,36,72,144,288`` (pairs of racks under a leaf spine, fours under the next). Each
state loads every rack to its own drawn level (some nodes half used), then one gang of an
NVL72-scaled mix (1-72 whole nodes, TP 4 or 8, PP by size) is placed three ways on the same free
map: Slurm 24.11 as users submit it (``--nodes=N --gres=gpu:4``, ranks in node order),
Slurm 24.11 with ``--segment=<nodes of one TP x PP replica>`` (where that fits in a rack), and
railgang's ``place`` on the fabric built with ``blocks_are_nvlink``. Reported: gangs placed, TP
groups inside one NVLink domain, racks used over the fewest possible, whole racks still free
after the placement (what a queued whole-rack gang needs), and time per placement.

    .venv/bin/python -m benchmarks.topology.block_bench --states 300 --seed 0
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from benchmarks.baselines.slurm_block import BlockLayout, segment_size, slurm_block_nodes
from benchmarks.baselines.slurm_tree import ranks_in_order
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import Fabric, fabric_from_conf
from railgang.topology.placement import GangRequest, Placement, place

GPUS, PER_RACK = 4, 18
LOADS = (0.0, 0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
# (nodes, tp, pp, weight): an NVL72-scaled Philly mix, most gangs small, a few whole racks and more
MIX = ((1, 4, 1, 20), (2, 8, 1, 18), (4, 8, 1, 16), (8, 8, 2, 12), (9, 4, 3, 8), (16, 8, 4, 8),
       (18, 8, 3, 8), (36, 8, 6, 5), (72, 8, 9, 3))


def fleet(racks: int) -> tuple[Fabric, BlockLayout]:
    names = [f"gb{i:03d}" for i in range(1, racks * PER_RACK + 1)]
    sizes = [PER_RACK << k for k in range(racks.bit_length()) if 1 << k <= racks]
    text = "".join(f"BlockName=rack{r + 1:02d} Nodes=gb[{r * PER_RACK + 1:03d}-{(r + 1) * PER_RACK:03d}]\n"
                   for r in range(racks)) + f"BlockSizes={','.join(map(str, sizes))}\n"
    conf = parse_topology(text, "<gb200>")
    layout = BlockLayout(tuple(tuple(names[r * PER_RACK:(r + 1) * PER_RACK]) for r in range(racks)), tuple(sizes))
    return fabric_from_conf(conf, default_gpus=GPUS, blocks_are_nvlink=True), layout


def draw_free(fabric: Fabric, layout: BlockLayout, rng: random.Random) -> dict[str, frozenset[int]]:
    free: dict[str, frozenset[int]] = {}
    for blk in layout.blocks:
        load = rng.choice(LOADS)
        for n in blk:
            if rng.random() < load:
                continue
            if rng.random() < 0.1:
                free[n] = frozenset(rng.sample(range(GPUS), rng.randint(1, GPUS - 1)))
            else:
                free[n] = frozenset(range(GPUS))
    return free


@dataclass(frozen=True)
class Seen:
    """One placement: TP groups (inside one domain / all), racks over the fewest, whole racks left."""

    tp_in_domain: int
    tp_groups: int
    extra_racks: int
    whole_racks_left: int


@dataclass
class Tally:
    seen: dict[int, Seen] = field(default_factory=dict)  # state -> what the placement did
    seconds: list[float] = field(default_factory=list)


def _score(fabric: Fabric, layout: BlockLayout, free: Mapping[str, frozenset[int]], p: Placement,
           nodes: int) -> Seen:
    groups: dict[tuple[int, int], set[str]] = {}
    for r in p.ranks:
        groups.setdefault((r.pp_stage, r.dp_rank), set()).add(fabric.domain_of(r.node))
    racks = {fabric.leaf_of(n) for n in p.gpus}
    used = set(p.gpus)
    left = sum(1 for blk in layout.blocks if all(len(free.get(n, ())) == GPUS and n not in used for n in blk))
    return Seen(sum(1 for doms in groups.values() if len(doms) == 1), len(groups),
                len(racks) - -(-nodes // PER_RACK), left)


def run(racks: int, states: int, seed: int) -> dict[str, Tally]:
    fabric, layout = fleet(racks)
    rng = random.Random(seed)
    out = {k: Tally() for k in ("slurm 24.11", "slurm 24.11 --segment", "railgang")}
    weights = [w for *_, w in MIX]
    for s in range(states):
        free = draw_free(fabric, layout, rng)
        nodes, tp, pp, _ = rng.choices(MIX, weights)[0]
        if nodes > racks * PER_RACK:
            continue
        req = GangRequest(nodes * GPUS, tp=tp, pp=pp)
        usable = {n for n, g in free.items() if len(g) == GPUS}
        seg = segment_size(nodes, tp, pp, GPUS, PER_RACK)
        for name, segment in (("slurm 24.11", 0), ("slurm 24.11 --segment", seg)):
            t0 = time.perf_counter()
            got = slurm_block_nodes(layout, usable, nodes, segment)
            out[name].seconds.append(time.perf_counter() - t0)
            if got is not None:
                p = ranks_in_order([(n, g) for n in got for g in range(GPUS)], tp, pp)
                out[name].seen[s] = _score(fabric, layout, free, p, nodes)
        t0 = time.perf_counter()
        rg = place(fabric, free, req, seed=s)
        out["railgang"].seconds.append(time.perf_counter() - t0)
        if isinstance(rg, Placement):
            out["railgang"].seen[s] = _score(fabric, layout, free, rg, nodes)
    return out


def table(out: dict[str, Tally], states: int) -> str:
    """Placed counts over all states; the other columns over the states every placement placed."""
    common = set.intersection(*(set(t.seen) for t in out.values()))
    lines = ["| placement | gangs placed | TP groups inside one NVLink domain* | racks over the fewest (mean)* | "
             "whole racks left free (mean)* | ms per placement (median) |", "| --- | --- | --- | --- | --- | --- |"]
    for name, t in out.items():
        rows = [t.seen[s] for s in sorted(common)]
        inside, groups = sum(r.tp_in_domain for r in rows), sum(r.tp_groups for r in rows)
        lines.append(f"| {name} | {len(t.seen)}/{states} | {inside}/{groups} ({100 * inside / max(groups, 1):.1f}%) | "
                     f"{statistics.fmean([r.extra_racks for r in rows] or [0]):.2f} | "
                     f"{statistics.fmean([r.whole_racks_left for r in rows] or [0]):.2f} | "
                     f"{1e3 * statistics.median(t.seconds or [0]):.2f} |")
    lines.append(f"\n\\* over the {len(common)} states where every placement placed the gang")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", type=int, default=16)
    ap.add_argument("--states", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.monotonic()
    out = run(args.racks, args.states, args.seed)
    print(table(out, args.states))
    print(f"\n{args.racks} racks x {PER_RACK} nodes x {GPUS} GPUs, {args.states} states, seed {args.seed}; "
          f"{time.monotonic() - t0:.1f} s; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
