"""Topology placement benchmark: quality vs the exhaustive optimum, modeled all-reduce time vs random
and Slurm-like placement, and placement speed. Everything side by side in one run.

    .venv/bin/python -m benchmarks.topology.topology_bench [--quick]

Prints Markdown to stdout (pasted into BENCHMARKS.md). Deterministic (fixed seeds) except the
timings. Takes about a minute on a 2-core machine.
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from types import MappingProxyType

from benchmarks.baselines.slurm_tree import ranks_in_order, slurm_tree_place
from benchmarks.topology.topology_stream import stream
from railgang.topology.comm.hardware import DGX_H100
from railgang.topology.comm.model import allreduce_time, concurrent_allreduce
from railgang.topology.comm.published import CASES, evaluate
from railgang.topology.comm_model import allreduce_time_s, step_comm_time_s
from railgang.topology.fabric import Fabric, fabric_from_shape
from railgang.topology.health import LinkHealth
from railgang.topology.occupancy import random_occupancy
from railgang.topology.placement import (
    CLASS_WEIGHTS,
    GangRequest,
    Placement,
    Unplaceable,
    place,
)
from railgang.topology.placement.layout import layout
from railgang.topology.placement.model import Container, eligible_containers, normalise

Free = Mapping[str, frozenset[int]]


def pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


# -- baselines ------------------------------------------------------------------------------------


def random_placement(fabric: Fabric, free: Free, req: GangRequest, rng: random.Random) -> Placement | None:
    pool = [(n, g) for n in fabric.nodes for g in sorted(free.get(n, ()))]
    if len(pool) < req.gpus:
        return None
    return ranks_in_order(rng.sample(pool, req.gpus), req.tp, req.pp)


def slurm_like(fabric: Fabric, free: Free, req: GangRequest, drained: Collection[str] = ()) -> Placement | None:
    """Slurm 22.05 cons_tres + topology/tree (``benchmarks.baselines.slurm_tree``)."""
    return slurm_tree_place(fabric, free, req, drained=drained)


# -- exhaustive optimum on small clusters -----------------------------------------------------------


def exhaustive(fabric: Fabric, free: Free, req: GangRequest) -> tuple[float, float] | None:
    """(lowest cost, lowest physical-model step communication) over every minimal set of nodes and
    every choice of the partially used node, with the engine's own within-node layout and cost.
    The second is an independent measure: seconds from the fabric's links, not railgang's cost."""
    shape = normalise(req, fabric)
    if isinstance(shape, Unplaceable):
        return None
    conts = eligible_containers(fabric, free, req, shape, None)
    if isinstance(conts, Unplaceable):
        return None
    conts = [c for c in conts if c.units > 0]
    need = shape.units
    weights = CLASS_WEIGHTS[shape.job_class]
    best_cost, best_time = float("inf"), float("inf")

    def evaluate(chosen: list[Container]) -> None:
        nonlocal best_cost, best_time
        total = sum(c.units for c in chosen)
        waste = total - need
        options = range(len(chosen)) if waste else [0]
        for j in options:
            alloc = [(c, c.units - (waste if i == j else 0)) for i, c in enumerate(chosen)]
            p = layout(fabric, shape, [a for a in alloc if a[1] > 0], weights)
            best_cost = min(best_cost, p.cost)
            best_time = min(best_time, step_seconds(fabric, p, req))

    def dfs(start: int, chosen: list[Container], total: int) -> None:
        if total >= need:
            evaluate(chosen)
            return
        for i in range(start, len(conts)):
            dfs(i + 1, [*chosen, conts[i]], total + conts[i].units)

    dfs(0, [], 0)
    return (best_cost, best_time) if best_cost < float("inf") else None


def step_seconds(fabric: Fabric, p: Placement, req: GangRequest) -> float:
    """Physical model: step communication (8 GB gradients, 64 MB activations) for 3D gangs, a
    1 GB all-reduce over every GPU for pure data parallel."""
    if req.tp > 1 or req.pp > 1:
        return step_comm_time_s(fabric, p, 8e9, 64e6)["total"]
    return allreduce_time_s(fabric, p, 1e9)


def quality(states: int) -> list[str]:
    fabric = fabric_from_shape(16, 8, nodes_per_leaf=4, leaves_per_spine=2)
    requests = [GangRequest(16, tp=8), GangRequest(24, tp=8), GangRequest(32, tp=8, pp=2),
                GangRequest(16, tp=4, pp=2), GangRequest(16, tp=2, pp=2), GangRequest(12, job_class="dp"),
                GangRequest(20, job_class="dp")]
    rng = random.Random(2026)
    cost_ratios: list[float] = []
    time_ratios: list[float] = []
    base_ratios: list[float] = []
    optimal = skipped = 0
    while len(cost_ratios) < states:
        free = random_occupancy(fabric, rng.uniform(0.3, 0.6), rng.randrange(10**9))
        req = rng.choice(requests)
        p = place(fabric, free, req)
        opt = exhaustive(fabric, free, req)
        if isinstance(p, Unplaceable) or opt is None or opt[0] <= 0:
            skipped += 1
            continue
        cost_ratios.append(p.cost / opt[0])
        time_ratios.append(step_seconds(fabric, p, req) / opt[1])
        base = slurm_like(fabric, free, req)
        if base is not None:
            base_ratios.append(step_seconds(fabric, base, req) / opt[1])
        optimal += p.cost <= opt[0] + 1e-9
    return [
        f"Quality, 16 nodes x 8 GPUs (4 leaves, 2 spines), {states} random fragmented states "
        f"(30-60 % busy; {skipped} unplaceable states redrawn), 7 gang shapes:",
        "",
        "| metric | median | p95 | max | optimal |",
        "| --- | --- | --- | --- | --- |",
        f"| cost / exhaustive optimum | {statistics.median(cost_ratios):.3f} | {pct(cost_ratios, 95):.3f} | "
        f"{max(cost_ratios):.3f} | {optimal}/{states} |",
        f"| railgang: physical step comm / best over exhaustive set | {statistics.median(time_ratios):.3f} | "
        f"{pct(time_ratios, 95):.3f} | {max(time_ratios):.3f} | {sum(r <= 1 + 1e-9 for r in time_ratios)}/{states} |",
        f"| Slurm 22.05 baseline: same | {statistics.median(base_ratios):.3f} | "
        f"{pct(base_ratios, 95):.3f} | {max(base_ratios):.3f} | {sum(r <= 1 + 1e-9 for r in base_ratios)}/"
        f"{len(base_ratios)} |",
    ]


# -- the physical model against published measurements ---------------------------------------------


def model_validation() -> list[str]:
    """Model vs published nccl-tests bus bandwidth (sources in docs/topology.md), then the seed's
    four R-T7 numbers as a comparison (not a calibration target)."""
    lines = [
        "Physical model vs published nccl-tests `all_reduce_perf` bus bandwidth (datasheet inputs only):",
        "",
        "| system | size | measured busbw (GB/s) | model (GB/s) | algorithm | error | within 15 % | source |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    hits = 0
    for case in CASES:
        r = evaluate(case)
        ok = abs(r.error) <= 0.15
        hits += ok
        note = f" ({case.note})" if case.note else ""
        lines.append(f"| {case.system}{note} | {case.nbytes / 2**20:,.0f} MiB | {case.busbw_gbps:.1f} | "
                     f"{r.busbw_gbps:.1f} | {r.algorithm} | {r.error * 100:+.1f} % | {'yes' if ok else 'no'} | "
                     f"{case.source} |")
    lines += ["", f"{hits}/{len(CASES)} cases within 15 %.", ""]
    big = fabric_from_shape(1250, 8, nodes_per_leaf=32, leaves_per_spine=8)
    nodes = big.nodes
    rng = random.Random(0)
    scenarios = [
        ("8 whole nodes under one leaf", [(nodes[i], g) for i in range(8) for g in range(8)], 25),
        ("8 whole nodes on 8 leaves, rails aligned", [(nodes[i * 32], g) for i in range(8) for g in range(8)], 40),
        ("16 half nodes in one rack, rails mixed",
         [(nodes[i], g) for i in range(16) for g in (range(4) if i % 2 == 0 else range(4, 8))], 85),
        ("64 random GPUs of 1,250 nodes", rng.sample([(n, g) for n in nodes for g in range(8)], 64), 120),
    ]
    lines += ["The seed's R-T7 example (64 GPUs, 1 GB all-reduce) on the 1,250-node DGX H100 fabric, "
              "non-blocking, for comparison only:", "",
              "| placement | seed (ms) | physical model (ms) | busbw (GB/s) | channels |", "| --- | --- | --- | --- | --- |"]
    for label, gpus, seed_ms in scenarios:
        t = allreduce_time(big, gpus, 1e9)
        lines.append(f"| {label} | {seed_ms} | {t.seconds * 1e3:.1f} | {t.busbw_gbps:.0f} | {t.channels} |")
    return lines


def contention() -> list[str]:
    """A 16-GPU job across two leaves while k other jobs cross the same leaf uplinks (2:1
    oversubscribed leaves), and a same-leaf job beside them."""
    params = DGX_H100.with_(oversubscription=(2.0, 1.0))
    fabric = fabric_from_shape(64, 8, nodes_per_leaf=16)
    ns = fabric.nodes
    job = [(ns[0], g) for g in range(8)] + [(ns[16], g) for g in range(8)]
    local = [(ns[15], g) for g in range(8)] + [(ns[14], g) for g in range(8)]
    lines = ["Contention: 64 nodes in leaves of 16, leaf uplinks 2:1 oversubscribed (DGX H100 NICs); "
             "a 16-GPU job (n01 + n17, two leaves) all-reduces 1 GB while k other 2-node jobs also "
             "cross from leaf 1 to leaf 2; links shared max-min fairly:", "",
             "| k other cross-leaf jobs | job busbw (GB/s) | job 1 GB all-reduce (ms) | same-leaf job n15+n16 (ms) |",
             "| --- | --- | --- | --- |"]
    for k in (0, 4, 7, 8, 10, 13):
        others = [[(ns[1 + i], g) for g in range(8)] + [(ns[17 + i], g) for g in range(8)] for i in range(k)]
        times = concurrent_allreduce(fabric, [job, local, *others], 1e9, params=params)
        lines.append(f"| {k} | {times[0].busbw_gbps:.0f} | {times[0].seconds * 1e3:.2f} | "
                     f"{times[1].seconds * 1e3:.2f} |")
    return lines


# -- large cluster ------------------------------------------------------------------------------------


def big_cluster(states: int) -> tuple[list[str], Fabric, list[Free]]:
    fabric = fabric_from_shape(1250, 8, nodes_per_leaf=32, leaves_per_spine=8)
    frees: list[Free] = [random_occupancy(fabric, 0.5, seed) for seed in range(states)]
    jobs: list[tuple[str, GangRequest]] = [
        ("64 GPUs, data parallel", GangRequest(64, job_class="dp")),
        ("256 GPUs, tp8 pp4 dp8", GangRequest(256, tp=8, pp=4, dp=8)),
        ("128 GPUs, tp4 pp2 dp16", GangRequest(128, tp=4, pp=2, dp=16)),
    ]
    strategies: list[tuple[str, Callable[[Free, GangRequest, int], Placement | None]]] = [
        ("railgang", lambda f, r, s: p if isinstance(p := place(fabric, f, r, seed=s), Placement) else None),
        ("Slurm 22.05 cons_tres + topology/tree", lambda f, r, s: slurm_like(fabric, f, r)),
        ("random", lambda f, r, s: random_placement(fabric, f, r, random.Random(s))),
    ]
    lines = [
        f"Modeled communication on 1,250 nodes / 10,000 GPUs (3-level fat tree: 40 leaves of 32 nodes, "
        f"5 spines, 8 rails), 50 % random occupancy, median over {states} states:",
        "",
        "| job | placement | 1 GB all-reduce, all GPUs (ms) | leaves used | step comm tp / pp / dp / total (ms) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, req in jobs:
        for name, strategy in strategies:
            times, leaves, steps = [], [], []
            for seed, free in enumerate(frees):
                p = strategy(free, req, seed)
                if p is None:
                    continue
                times.append(allreduce_time_s(fabric, p, 1e9) * 1e3)
                leaves.append(len({fabric.leaf_of(n) for n in p.gpus}))
                if req.tp > 1:
                    steps.append(step_comm_time_s(fabric, p, 8e9, 64e6))
            step = "n/a (pure DP)"
            if steps:
                parts = [statistics.median(s[k] for s in steps) * 1e3 for k in ("tp", "pp", "dp", "total")]
                step = " / ".join(f"{v:.1f}" for v in parts)
            lines.append(f"| {label} | {name} | {statistics.median(times):.1f} | "
                         f"{statistics.median(leaves):g} | {step} |")
    lines += ["", "Step communication: 8 GB of gradients (DP groups all-reduce their 1/(tp·pp) shard), "
              "64 MB activations per TP all-reduce and per stage boundary, no overlap."]
    return lines, fabric, frees


def degraded(fabric: Fabric, frees: list[Free]) -> list[str]:
    """Same cluster with spine1's ports at half bandwidth and 3 % of nodes with one lame HCA."""
    rng = random.Random(7)
    lame_nodes = rng.sample(list(fabric.nodes), len(fabric.nodes) * 3 // 100)
    health = LinkHealth(
        hca=MappingProxyType({(n, rng.randrange(8)): 0.5 for n in lame_nodes}),
        switches=MappingProxyType({"spine1": 0.5}),
        quarantined=MappingProxyType({n: "lame HCA (symbol errors)" for n in lame_nodes}),
    )
    strategies: list[tuple[str, Callable[[Free, GangRequest, int], Placement | None]]] = [
        ("railgang, health-aware", lambda f, r, s: p if isinstance(
            p := place(fabric, f, r, seed=s, health=health), Placement) else None),
        ("railgang, blind to link health", lambda f, r, s: p if isinstance(
            p := place(fabric, f, r, seed=s), Placement) else None),
        ("Slurm 22.05, lame nodes drained", lambda f, r, s: slurm_like(fabric, f, r, health.quarantined)),
    ]
    lines = [
        f"Same cluster and states, with spine1 at half bandwidth and {len(lame_nodes)} nodes (3 %) with one "
        "lame HCA at half rate (quarantined); times modeled with that link health:",
        "",
        "| job | placement | 1 GB all-reduce, median / worst (ms) | step comm total, median / worst (ms) "
        "| placements touching a lame node |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, req in (("64 GPUs, data parallel", GangRequest(64, job_class="dp")),
                       ("256 GPUs, tp8 pp4 dp8", GangRequest(256, tp=8, pp=4, dp=8))):
        for name, strategy in strategies:
            times, steps, touched = [], [], 0
            for seed, free in enumerate(frees):
                p = strategy(free, req, seed)
                if p is None:
                    continue
                times.append(allreduce_time_s(fabric, p, 1e9, health=health) * 1e3)
                if req.tp > 1:
                    steps.append(step_comm_time_s(fabric, p, 8e9, 64e6, health=health)["total"] * 1e3)
                touched += any(n in health.quarantined for n in p.gpus)
            step = f"{statistics.median(steps):.1f} / {max(steps):.1f}" if steps else "n/a"
            lines.append(f"| {label} | {name} | {statistics.median(times):.1f} / {max(times):.1f} | {step} | "
                         f"{touched}/{len(times)} |")
    return lines


def _time_256(fabric: Fabric, frees: list[Free], repeats: int) -> list[float]:
    big = GangRequest(256, tp=8, pp=4, dp=8)
    ms: list[float] = []
    for r in range(repeats):
        free = frees[r % len(frees)]
        t0 = time.perf_counter()
        place(fabric, free, big, seed=r)
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def speed(fabric: Fabric, frees: list[Free], repeats: int) -> list[str]:
    ms = _time_256(fabric, frees, repeats)
    # A long-running daemon keeps its fabric and cluster state for hours: freezing them out of
    # the cyclic GC's view removes the full collections that otherwise land inside some calls.
    gc.freeze()
    ms_frozen = _time_256(fabric, frees, repeats)
    gc.unfreeze()
    small = fabric_from_shape(64, 8, nodes_per_leaf=8)
    small_frees = [random_occupancy(small, 0.5, s) for s in range(20)]
    rates = []
    for name, fab, fr in (("64 nodes", small, small_frees), ("1,250 nodes", fabric, frees)):
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 2.0:
            place(fab, fr[n % len(fr)], GangRequest(8), seed=n)
            n += 1
        elapsed = time.perf_counter() - t0
        rates.append((name, n / elapsed, elapsed / n * 1e3))
    out = [
        "Speed (one core, CPython):",
        "",
        "| measurement | result |",
        "| --- | --- |",
        f"| place 256 GPUs (tp8 pp4 dp8) on 1,250 nodes, {repeats} runs | median {statistics.median(ms):.1f} ms, "
        f"p99 {pct(ms, 99):.1f} ms |",
        f"| same, cluster state `gc.freeze()`d first | median {statistics.median(ms_frozen):.1f} ms, "
        f"p99 {pct(ms_frozen, 99):.1f} ms |",
    ]
    for name, rate, per in rates:
        out.append(f"| place 8-GPU jobs on {name} (50 % busy) | {rate:,.0f} placements/s ({per:.3f} ms each) |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Fewer states, for a smoke run.")
    args = parser.parse_args()
    n_quality, n_states, repeats = (40, 5, 40) if args.quick else (200, 20, 200)
    t0 = time.perf_counter()
    print(f"<!-- {platform.python_implementation()} {platform.python_version()}, {platform.machine()} -->")
    for line in model_validation():
        print(line)
    print()
    for line in contention():
        print(line)
    print()
    for line in quality(n_quality):
        print(line)
    print()
    lines, fabric, frees = big_cluster(n_states)
    for line in lines:
        print(line)
    print()
    for line in degraded(fabric, frees):
        print(line)
    print()
    for line in stream(300, (1, 2, 3) if args.quick else (1, 2, 3, 4, 5, 6, 7, 8)):
        print(line)
    print()
    for line in speed(fabric, frees, repeats):
        print(line)
    print(f"\n(total benchmark time {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
