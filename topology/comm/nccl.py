"""NCCL's all-reduce algorithms and their cost structure (ring and tree, Simple protocol).

Ring: ``2(n-1)/n · S`` bytes cross every ring edge, so ``t = 2(n-1)/n · S / busBW + latency``,
with ``2(n-1)`` steps, ``2·nodes`` of them over the network. Tree (NCCL's double binary tree
between nodes, a chain inside each): every byte is reduced up and broadcast down, ``t = 2·S /
busBW_tree + latency`` with ``busBW_tree = 0.92 · busBW`` and ``2·(ppn-1)`` NVLink plus
``2·log2(nodes)`` network steps. NCCL picks the faster one for each size; so does the model.
Latencies are NCCL's own per-step figures (``hardware.NcclLatency``) plus the port-to-port
latency of every switch an inter-node step crosses beyond the first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from railgang.topology.comm.hardware import CommParams
from railgang.topology.comm.network import Flows

__all__ = ["Algorithm", "CollectiveTime", "allreduce", "p2p"]

Algorithm = Literal["ring", "tree", "auto"]


@dataclass(frozen=True)
class CollectiveTime:
    """A modeled collective: seconds, the algorithm chosen and the bus bandwidth it ran at."""

    seconds: float
    algorithm: str
    busbw_gbps: float
    channels: int = 1


def _ring(nbytes: float, busbw: float, f: Flows, p: CommParams) -> float:
    n, nodes = f.ranks, f.nodes
    lat = p.latency
    steps = 2 * (n - 1)
    inter = 2 * nodes if nodes > 1 else 0
    extra_hops = max(0, f.max_switch_hops - 1) * p.nic.switch_hop_us
    us = lat.base_ring + (steps - inter) * lat.nvlink_ring + inter * (lat.net_ring + extra_hops)
    return 2 * (n - 1) / n * nbytes / (busbw * 1e9) + us * 1e-6


def _tree(nbytes: float, busbw: float, f: Flows, p: CommParams) -> float:
    lat = p.latency
    extra_hops = max(0, f.max_switch_hops - 1) * p.nic.switch_hop_us
    depth = math.log2(f.nodes) if f.nodes > 1 else 0.0
    us = lat.base_tree + 2 * ((f.ranks_per_node - 1) * lat.nvlink_tree + depth * (lat.net_tree + extra_hops))
    return 2 * nbytes / (busbw * lat.tree_bw_factor * 1e9) + us * 1e-6


def allreduce(nbytes: float, rate: float, f: Flows, params: CommParams,
              algorithm: Algorithm = "auto") -> CollectiveTime:
    """All-reduce of ``nbytes`` over the ranks of ``f`` whose edges each move ``rate`` GB/s."""
    if f.ranks < 2 or nbytes <= 0:
        return CollectiveTime(0.0, "none", 0.0, f.channels)
    busbw = min(f.channels * rate, f.cap * f.channels)
    busbw = max(busbw, 1e-9)
    options = {"ring": _ring(nbytes, busbw, f, params)}
    if algorithm in ("tree", "auto"):
        options["tree"] = _tree(nbytes, busbw, f, params)
    if algorithm == "ring":
        name = "ring"
    elif algorithm == "tree":
        name = "tree"
    else:
        name = min(options, key=lambda k: options[k])
    t = options[name]
    return CollectiveTime(t, name, 2 * (f.ranks - 1) / f.ranks * nbytes / t / 1e9, f.channels)


def p2p(nbytes: float, rate: float, f: Flows, params: CommParams) -> CollectiveTime:
    """One send of ``nbytes`` at ``rate`` GB/s plus one step's latency."""
    if nbytes <= 0:
        return CollectiveTime(0.0, "p2p", 0.0)
    bw = min(rate, f.cap)
    lat = params.latency
    net = bool(f.usage)
    us = lat.net_ring + max(0, f.max_switch_hops - 1) * params.nic.switch_hop_us if net else lat.nvlink_ring
    t = nbytes / (bw * 1e9) + us * 1e-6
    return CollectiveTime(t, "p2p", nbytes / t / 1e9)
