"""Modeled collective times, so placement quality is measured in seconds (issue 3, item 6).

A ring all-reduce moves ``2(n-1)/n · S`` bytes through every ring edge and is paced by its slowest
edge, plus one hop latency per step. Edge bandwidth: NVLink inside a node (or NVLink domain);
otherwise one IB link divided by the contention of the highest level the edge climbs, or of a
rail change (on rail-optimised fabrics cross-rail traffic hairpins through shared spine ports),
times the health factor of the worst port or switch on its path. A ring whose inter-node hops
all stay on one leaf and one rail plane gets in-switch aggregation (SHARP-like), which moves
about ``1.25 · S`` instead of ``2 · S``.

The defaults are calibrated to the seed's 64-GPU, 1 GB example (R-T7): random ≈ 120 ms,
rack-aware (one rack, rails mixed) ≈ 85 ms, rail-aligned ≈ 40 ms, one leaf ≈ 25 ms. It ignores
contention *between* concurrent jobs and overlap with compute: it ranks placements, it does not
predict step times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement.types import Placement, RankSlot

__all__ = [
    "DEFAULT_PARAMS",
    "CommParams",
    "allreduce_time_s",
    "ring_allreduce_time_s",
    "step_comm_time_s",
]

_GB = 1e9


@dataclass(frozen=True)
class CommParams:
    """Bandwidths (GB/s per direction), contention divisors and latencies of the model."""

    nvlink_gbps: float = 450.0          # NVLink 4, per direction, per GPU
    ib_gbps: float = 50.0               # one 400 Gb/s NDR port
    level_contention: tuple[float, ...] = (1.0, 1.0, 3.0)  # same leaf, via spine (1:1), via core (3:1)
    cross_rail_contention: float = 2.15  # rail change: hairpin through shared spine ports
    aggregation_traffic: float = 1.25   # bytes moved per byte reduced with in-switch aggregation
    hop_latency_s: tuple[float, ...] = (2e-6, 5e-6, 7e-6, 10e-6)  # NVLink, leaf, spine, core

    def latency(self, distance: int) -> float:
        return self.hop_latency_s[min(distance, len(self.hop_latency_s) - 1)]

    def contention(self, distance: int) -> float:
        return self.level_contention[min(distance, len(self.level_contention)) - 1]


DEFAULT_PARAMS = CommParams()


def _ring_order(fabric: Fabric, gpus: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """Nodes in topology order; inside a node, enter and leave on rails shared with the previous
    and next node when possible, closing the loop too (NCCL builds rail-local rings the same way)."""
    by_node: dict[str, list[int]] = {}
    for node, i in gpus:
        by_node.setdefault(node, []).append(i)
    nodes = sorted(by_node, key=fabric.index)
    sets = [sorted(by_node[n]) for n in nodes]
    m = len(nodes)
    if m == 1:
        return [(nodes[0], i) for i in sets[0]]
    first_common = sorted(set(sets[0]) & set(sets[-1]))
    first_entry = first_common[0] if first_common else sets[0][0]
    order: list[tuple[str, int]] = []
    entry = first_entry
    for k, node in enumerate(nodes):
        idxs = sets[k]
        if entry not in idxs:
            entry = idxs[0]
        nxt = set(sets[(k + 1) % m])
        if k == m - 1 and first_entry in idxs and (first_entry != entry or len(idxs) == 1):
            exit_ = first_entry
        else:
            shared = [i for i in idxs if i in nxt]
            others = [i for i in shared if i != entry]
            if k == m - 2:  # leave first_entry to the last node, which must exit on it
                others = [i for i in others if i != first_entry] or others
            exit_ = (others or shared or [i for i in idxs if i != entry] or [entry])[0]
        middle = [i for i in idxs if i not in (entry, exit_)]
        seq = [entry, *middle] + ([exit_] if exit_ != entry else [])
        order.extend((node, i) for i in seq)
        entry = exit_
    return order


def ring_allreduce_time_s(
    fabric: Fabric,
    gpus: Sequence[tuple[str, int]],
    nbytes: float,
    *,
    health: LinkHealth | None = None,
    params: CommParams = DEFAULT_PARAMS,
) -> float:
    """Modeled ring all-reduce of ``nbytes`` over ``gpus`` ((node, gpu index) pairs of the fabric)."""
    n = len(gpus)
    if n < 2 or nbytes <= 0:
        return 0.0
    ring = _ring_order(fabric, gpus)
    node_ports: dict[str, float] = {}
    if health is not None:
        for node, i in gpus:
            node_ports[node] = min(node_ports.get(node, 1.0), health.port_factor(node, i))
    slowest = float("inf")
    worst_latency = 0.0
    aggregate = True
    inter = False
    for k in range(n):
        a, b = ring[k], ring[(k + 1) % n]
        d = fabric.distance(a[0], b[0])
        if d == 0:
            bw = params.nvlink_gbps
        else:
            inter = True
            contention = params.contention(d)
            if fabric.rail_optimised and a[1] != b[1]:
                contention = max(contention, params.cross_rail_contention)
                aggregate = False
            if d > 1:
                aggregate = False
            bw = params.ib_gbps / contention
            if health is not None:
                # NCCL spreads inter-node traffic over every NIC of the job on a node, so the
                # slowest of them paces its channel and with it the collective.
                factor = min(health.path_factor(fabric, a, b), node_ports[a[0]], node_ports[b[0]])
                if factor < 1.0:
                    aggregate = False
                bw *= max(factor, 1e-3)
        slowest = min(slowest, bw)
        worst_latency = max(worst_latency, params.latency(d))
    traffic = params.aggregation_traffic if (aggregate and inter) else 2.0 * (n - 1) / n
    return traffic * nbytes / (slowest * _GB) + 2 * (n - 1) * worst_latency


def allreduce_time_s(
    fabric: Fabric,
    placement: Placement,
    nbytes: float,
    *,
    health: LinkHealth | None = None,
    params: CommParams = DEFAULT_PARAMS,
) -> float:
    """Modeled all-reduce of ``nbytes`` across every GPU of ``placement`` (one ring, R-T7 example)."""
    return ring_allreduce_time_s(fabric, [(r.node, r.gpu) for r in placement.ranks], nbytes,
                                 health=health, params=params)


def _groups(ranks: Sequence[RankSlot], key: str) -> list[list[tuple[str, int]]]:
    out: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for r in ranks:
        k = (r.pp_stage, r.dp_rank) if key == "tp" else (r.tp_rank, r.pp_stage)
        out.setdefault(k, []).append((r.node, r.gpu))
    return list(out.values())


def step_comm_time_s(
    fabric: Fabric,
    placement: Placement,
    grad_bytes: float,
    activation_bytes: float,
    *,
    health: LinkHealth | None = None,
    params: CommParams = DEFAULT_PARAMS,
) -> dict[str, float]:
    """Communication of one 3D-parallel step, by kind, without overlap.

    tp: every TP group all-reduces ``activation_bytes`` (slowest group); pp: each stage boundary
    sends ``activation_bytes`` point to point (slowest boundary); dp: every DP group all-reduces
    its ``grad_bytes / (tp·pp)`` shard (slowest group). ``total`` is their sum.
    """
    ranks = placement.ranks
    tp = 1 + max((r.tp_rank for r in ranks), default=0)
    pp = 1 + max((r.pp_stage for r in ranks), default=0)
    t_tp = max((ring_allreduce_time_s(fabric, g, activation_bytes, health=health, params=params)
                for g in _groups(ranks, "tp")), default=0.0)
    t_dp = max((ring_allreduce_time_s(fabric, g, grad_bytes / (tp * pp), health=health, params=params)
                for g in _groups(ranks, "dp")), default=0.0)
    where = {(r.tp_rank, r.pp_stage, r.dp_rank): (r.node, r.gpu) for r in ranks}
    t_pp = 0.0
    for (t, s, d), a in where.items():
        b = where.get((t, s + 1, d))
        if b is None:
            continue
        dist = fabric.distance(a[0], b[0])
        if dist == 0:
            bw = params.nvlink_gbps
        else:
            c = params.contention(dist)
            if fabric.rail_optimised and a[1] != b[1]:
                c = max(c, params.cross_rail_contention)
            bw = params.ib_gbps / c
            if health is not None:
                bw *= max(health.path_factor(fabric, a, b), 1e-3)
        t_pp = max(t_pp, activation_bytes / (bw * _GB) + params.latency(dist))
    return {"tp": t_tp, "pp": t_pp, "dp": t_dp, "total": t_tp + t_pp + t_dp}
