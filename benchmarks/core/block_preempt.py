"""Whole-domain preemption and defragmentation on a GB200-style fleet, through the real decision
core in the simulator (issue 21 items 3-4, "Measure").

16 NVL72 racks (288 nodes × 4 GPUs, one topology/block block per rack, ``BlockSizes`` as in
``block_bench``). Jobs arrive as a Poisson stream from ``block_bench``'s NVL72-scaled mix (1-72
whole nodes, TP 4-8, PP by size; log-normal run times, median 40 min) at ``--load``; gangs of a
rack or more (>= 18 nodes) are production (class 1), the rest batch (class 3), so the big gangs
may evict. Every run is the same core (``--policy``, default ``slurm``: multifactor priority +
EASY backfill, what Slurm users have; railgang's runs with the daemon's leaf
waits: ``leaf_wait_s`` 120 s, ``leaf_holds`` 2, ``leaf_wait_max_s`` 600 s) on the same queue with
the same budgets (``--churn-cap`` of the GPUs a 10-min window, a job evicted at most once an
hour); only these differ:

- ``slurm 24.11 placement``: Slurm 24.11's own block placement (transcribed,
  ``benchmarks/baselines/slurm_block.py``; whole free nodes, as ``--nodes=N --gres=gpu:4``) as the core's
  placer, with the core's node-by-node eviction. Slurm's own preemption is *not* transcribed: the
  victims are railgang's.
- ``railgang, node-by-node eviction``: railgang's placement, today's eviction.
- ``railgang, no defrag``: railgang's placement + whole-domain eviction (``whole_domain_evict``).
- ``railgang``: the same + defragmentation (``CycleConfig.defrag``).

``--flat`` makes every job batch: nobody may evict, so only defragmentation can clear a rack.

Reported: TP groups inside one NVLink domain (each start's GPUs in node order cut into TP groups,
as Slurm ranks them), 18-node (one-rack) gangs started inside one rack, mean wait of gangs of a rack or more, of the smaller jobs, GPU-hours
stranded (free GPUs outside any wholly free rack while a rack-sized gang waits), GPU-hours lost
to preemption and moves (the simulator's rolled-back work + restores), evictions and moves.

    .venv/bin/python -m benchmarks.core.block_preempt --jobs 400 --load 0.9 --seed 0
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.baselines.slurm_block import BlockLayout, slurm_block_nodes
from benchmarks.topology.block_bench import GPUS, PER_RACK, fleet
from benchmarks.topology.block_stream import draw_jobs
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.gang import Placed, Placer, topology_placer
from railgang.daemon.core.model.preemption import PreemptionBudget
from railgang.daemon.core.phases.defrag import DefragRules
from railgang.daemon.core.phases.migrate import MigrationRules
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import Fabric
from railgang.topology.placement.types import GangRequest, PlacementFailure, Unplaceable


def slurm_placer(layout: BlockLayout) -> Placer:
    """Slurm 24.11's block placement behind the core's placer seam: whole free nodes only."""
    def go(fabric: Any, free: Mapping[str, frozenset[int]], request: GangRequest, *,
           health: Any = None, seed: int = 0) -> Placed | Unplaceable:
        usable = {n for n, g in free.items() if len(g) == GPUS and (request.nodes is None or n in request.nodes)}
        nodes = -(-request.gpus // GPUS)
        got = slurm_block_nodes(layout, usable, nodes, 0)
        if got is None:
            return Unplaceable(PlacementFailure.TOPOLOGY_FRAGMENTED, "no block set of whole free nodes")
        return Placed({n: tuple(range(GPUS)) for n in got}, float(len({fabric.leaf_of(n) for n in got})))
    return go


@dataclass
class Watch:
    """Read-only observer: TP groups per start, stranded GPU-seconds while a rack gang waits."""

    fabric: Fabric
    jobs: Mapping[str, TraceJob]
    big_gpus: int = PER_RACK * GPUS  # a gang of this many GPUs or more needs whole leaves
    tp_inside: int = 0
    tp_groups: int = 0
    stranded_gpu_s: float = 0.0
    seen: set[str] = field(default_factory=set)
    last: float = 0.0
    strand_now: int = 0

    def __call__(self, now: float, backend: SimBackend) -> None:
        self.stranded_gpu_s += self.strand_now * (now - self.last)
        self.last = now
        for jid, sj in backend.running.items():
            if jid not in self.seen and sj.assignment is not None:
                self.seen.add(jid)
                self._count(sj.assignment, self.jobs[jid].tp)
        big = any(self.jobs[j].gpus >= self.big_gpus for _, _, j in backend.pending)
        self.strand_now = self._stranded(backend.free) if big else 0

    def _count(self, assignment: Mapping[str, tuple[int, ...]], tp: int) -> None:
        gpus = [(self.fabric.index(n), n, g) for n, gs in assignment.items() for g in gs]
        doms = [self.fabric.domain_of(n) for _, n, _ in sorted(gpus)]
        for i in range(0, len(doms) - tp + 1, tp):
            self.tp_groups += 1
            self.tp_inside += len(set(doms[i:i + tp])) == 1

    def _stranded(self, free: Mapping[str, set[int]]) -> int:
        out = 0
        for leaf in self.fabric.leaves:
            members = self.fabric.direct_nodes(leaf)
            got = sum(len(free.get(n, ())) for n in members)
            out += 0 if got == sum(self.fabric.facts(n).gpus for n in members) else got
        return out


def trace(count: int, load: float, racks: int, seed: int, *, flat: bool = False) -> list[TraceJob]:
    """The stream; ``flat``: every job batch (nobody may evict: only defragmentation helps)."""
    return [TraceJob(f"j{j.jid}", j.arrive, j.nodes * GPUS, j.run, tp=j.tp, pp=j.pp,
                     priority_class=1 if j.nodes >= PER_RACK and not flat else 3)  # type: ignore[arg-type]
            for j in draw_jobs(count, load, racks, seed)]


def run_one(name: str, jobs: list[TraceJob], fabric: Fabric, layout: BlockLayout | None, churn: float,
            policy: str = "slurm", big_gpus: int = PER_RACK * GPUS, patience_s: float = 0.0,
            leaf_wait: tuple[float, float] | None = None, burst_gpus: int = 0,
            lend: bool = False) -> dict[str, float]:
    """One run of ``NAMES``; ``layout`` None: a tree fabric (no Slurm row), ``big_gpus``: a whole
    leaf's GPUs (gangs at least this large are the ones that need whole leaves), ``patience_s``:
    ``PreemptionBudget.domain_patience_s`` and ``leaf_wait`` (``leaf_wait_s``, ``leaf_wait_max_s``)
    of the whole-domain rows (None: the daemon's 120 s, 600 s), ``burst_gpus``:
    ``PreemptionBudget.churn_burst_gpus`` of the whole-domain rows (0: none), ``lend``: their
    ``CycleConfig.backfill_held_leaf``."""
    # the simulator's jobs do not save on the signal (SimConfig.panic_checkpoint False): a move
    # loses the work since the last periodic checkpoint, and the payback rule must count it
    base = CycleConfig(budget=PreemptionBudget(churn_cap=churn), migration=MigrationRules(checkpoint_on_signal=False))
    patient = replace(base.budget, domain_patience_s=patience_s, churn_burst_gpus=burst_gpus)
    daemon = replace(base, leaf_wait_s=120.0, leaf_holds=2, leaf_wait_max_s=600.0)  # the daemon's defaults
    # the whole-domain rows: gangs wait for a whole leaf ``leaf_wait`` (first, second bound), then
    # evict for one after ``patience_s`` (both 0: the daemon's defaults, evicting at once)
    lw, lwm = leaf_wait or (120.0, 600.0)
    domain = replace(daemon, leaf_wait_s=lw, leaf_wait_max_s=lwm, whole_domain_evict=True, budget=patient,
                     backfill_held_leaf=lend)
    cycle = {
        "slurm 24.11 placement": base,
        "railgang, node-by-node eviction": daemon,
        "railgang, no defrag": domain,
        "railgang": replace(domain, defrag=DefragRules(enabled=True)),
    }[name]
    placer = slurm_placer(layout) if name.startswith("slurm") and layout is not None else topology_placer
    watch = Watch(fabric, {j.job_id: j for j in jobs}, big_gpus)
    res = simulate(jobs, get(policy), fabric, config=EngineConfig(cycle=cycle), placer=placer, observer=watch)
    big = [r for r in res.records if r.gpus >= big_gpus and r.start is not None]
    small = [r for r in res.records if r.gpus < big_gpus and r.start is not None]
    return {
        "tp_inside": 100.0 * watch.tp_inside / max(watch.tp_groups, 1),
        "rack_in_one": sum(r.first_leaves == 1 for r in big if r.gpus == big_gpus),
        "racks": sum(1 for r in big if r.gpus == big_gpus),
        "big_wait_min": statistics.fmean([(r.start or 0) - r.submit for r in big] or [0]) / 60,
        "big_started": len(big), "big_total": sum(1 for j in jobs if j.gpus >= big_gpus),
        "small_wait_min": statistics.fmean([(r.start or 0) - r.submit for r in small] or [0]) / 60,
        "stranded_gpu_h": watch.stranded_gpu_s / 3600,
        "lost_gpu_h": sum(r.lost_gpu_s for r in res.records) / 3600,
        "evictions": sum(r.preemptions for r in res.records), "moves": res.migrations,
        "wall_s": res.wall_s,
    }


def seconds(text: str) -> float:
    """A finite, non-negative number of seconds (argparse type: NaN would never evict)."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds >= 0")
    return value


NAMES = ("slurm 24.11 placement", "railgang, node-by-node eviction", "railgang, no defrag", "railgang")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--racks", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--churn-cap", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=NAMES, action="append")
    ap.add_argument("--flat", action="store_true", help="every job batch: no evictions, only moves")
    ap.add_argument("--patience", type=seconds, default=0.0, metavar="S",
                    help="domain_patience_s of the whole-domain rows (0: evict at once)")
    ap.add_argument("--leaf-wait", type=seconds, nargs=2, metavar=("S", "MAX_S"),
                    help="leaf_wait_s and leaf_wait_max_s of the whole-domain rows (default 120 600)")
    ap.add_argument("--burst", type=int, default=0, metavar="GPUS",
                    help="churn_burst_gpus of the whole-domain rows (0: the churn cap; a rack is 72)")
    ap.add_argument("--backfill-held-leaf", action="store_true",
                    help="backfill_held_leaf in the whole-domain rows")
    ap.add_argument("--policy", default="slurm", help="the core's policy for every run (slurm: multifactor + EASY backfill)")
    args = ap.parse_args()
    fabric, layout = fleet(args.racks)
    jobs = trace(args.jobs, args.load, args.racks, args.seed, flat=args.flat)
    print("| run | TP groups in one NVLink domain | 18-node gangs inside one rack | rack+ gangs: mean wait (min), started | smaller jobs: mean "
          "wait (min) | GPU-h stranded | GPU-h lost to evictions + moves | evictions (moves) | wall s |")
    print("| --- " * 8 + "|")
    for name in args.only or NAMES:
        r = run_one(name, jobs, fabric, layout, args.churn_cap, args.policy, patience_s=args.patience,
                    leaf_wait=tuple(args.leaf_wait) if args.leaf_wait else None, burst_gpus=args.burst, lend=args.backfill_held_leaf)
        print(f"| {name} | {r['tp_inside']:.1f}% | {r['rack_in_one']:.0f}/{r['racks']:.0f} | {r['big_wait_min']:.1f} ({r['big_started']:.0f}/{r['big_total']:.0f}) | "
              f"{r['small_wait_min']:.1f} | {r['stranded_gpu_h']:.0f} | {r['lost_gpu_h']:.1f} | "
              f"{r['evictions']:.0f} ({r['moves']:.0f}) | {r['wall_s']:.0f} |", flush=True)
    print(f"\n{args.racks} racks, {args.jobs} jobs, offered load {args.load}, churn cap {args.churn_cap}, seed "
          f"{args.seed}{', all batch' if args.flat else ''}, policy {args.policy}, patience {args.patience:.0f} s, leaf wait {args.leaf_wait or [120, 600]}, burst {args.burst}, backfill held leaf {args.backfill_held_leaf}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
