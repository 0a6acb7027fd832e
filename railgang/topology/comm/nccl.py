"""NCCL's all-reduce algorithms and their cost structure (ring and tree, Simple protocol).

Ring: ``2(n-1)/n · S`` bytes cross every ring edge, so ``t = 2(n-1)/n · S / busBW + latency``,
with ``2(n-1)`` steps, ``2·nodes`` of them over the network. Tree (NCCL's double binary tree
between nodes, a chain inside each): every byte is reduced up and broadcast down, ``t = 2·S /
busBW_tree + latency`` with ``busBW_tree = 0.92 · busBW`` and ``2·(ppn-1)`` NVLink plus
``2·log2(nodes)`` network steps. NCCL picks the faster one for each size; so does the model.
Latencies are NCCL's own per-step figures (``hardware.NcclLatency``) plus the port-to-port
latency of every switch an inter-node step crosses beyond the first.

NVLS (NVLink SHARP, NVSwitch gen 3 + SM90, opt-in ``CommParams.nvls``): NCCL's own rule from
``src/graph/tuning.cc`` (``ncclTopoTuneModel``) on the NVLS graph ``src/graph/search.cc`` builds.
One NVLS channel per GPU of the node (``NCCL_MAX_NVLS_ARITY`` at most); the search gives each
channel ``bwIntra``, the fastest ``sm90SpeedArray*`` entry whose load fits every GPU's NVSwitch
link (``ncclTopoSearchTryNvls``: the head GPU twice, the others once, so ``(ppn+1)·bwIntra <=
NVLink``) and, with several nodes, the NIC; pass 2 then raises ``bwInter`` one entry at a time
while it stays below ``2·bwIntra`` (and fits the NIC). Per channel ``intraBw = bwIntra ·
nvlsEfficiency · (ch-1)/ch · 2`` (all-reduce pipelines two operations), ``bw = min(intraBw,
bwInter)`` on one node (NVLS), ``min(intraBw, bwInter·(2 if nodes<=2), perChMaxNVLSTreeBw)`` on
several (NVLS_TREE), bus bandwidth ``ch·bw``. Latency: ``hwLat[NVLINK][NVLS]`` (+
``2·log2i(nodes)·hwLat[NET][NVLS_TREE]`` for the tree); base latency 0. NCCL disables NVLS_TREE
on one node and NVLS on several (without CollNet); the model does the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from railgang.topology.comm.hardware import CommParams
from railgang.topology.comm.network import Flows

__all__ = ["Algorithm", "CollectiveTime", "allreduce", "nvls_busbw", "p2p"]

Algorithm = Literal["ring", "tree", "nvls", "auto"]


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


def _raise_inter(speeds: tuple[float, ...], bw_intra: float, bw_inter: float, fits: float) -> float:
    """search.cc pass 2 for NVLS: raise ``bwInter`` one speed at a time while it is below twice
    ``bwIntra`` and the next speed still fits (``fits``: the NIC, unbounded on one node)."""
    i = speeds.index(bw_inter)
    while i > 0 and bw_inter < 2 * bw_intra and speeds[i - 1] <= fits:
        i -= 1
        bw_inter = speeds[i]
    return bw_inter


def nvls_busbw(rate: float, f: Flows, p: CommParams) -> tuple[str, float, int] | None:
    """NCCL's NVLS (one node) or NVLS_TREE (several) bus bandwidth in GB/s and its channel count,
    or None where NCCL has no NVLS graph (no NVLink SHARP, PCIe nodes, fewer than 2 GPUs a node)."""
    c = p.nvls_consts
    if not (p.nvls and p.gpu.has_nvls) or f.ranks_per_node < 2:
        return None
    nvlink = f.cap * f.channels  # per-GPU NVLink (network.ring_flows: cap = intra / channels)
    if nvlink < p.gpu.nvlink_gbps * (1 - 1e-9):
        return None  # PCIe-only node: no NVSwitch
    ch = min(f.ranks_per_node, c.max_arity)
    multi = f.nodes > 1
    speeds = c.speeds_inter if multi else c.speeds_intra
    # The node's network bandwidth spread over the NVLS heads (one per channel); unbounded on one node.
    net = min(rate, p.nic.gbps) * f.channels / ch if multi else float("inf")
    first = next((s for s in speeds if (ch + 1) * s <= nvlink and s <= net), None)
    if first is None:
        return None
    bw_intra = first
    bw_inter = _raise_inter(speeds, bw_intra, first, net)
    intra = bw_intra * c.efficiency * (ch - 1) / ch * 2.0
    if not multi:
        return "nvls", ch * min(intra, bw_inter), ch
    inter = bw_inter * (2 if f.nodes <= 2 else 1)
    cap = c.tree_per_channel_max[min(f.nodes, 3) - 1]
    return "nvls_tree", ch * min(intra, inter, cap), ch


def _nvls(nbytes: float, busbw: float, kind: str, f: Flows, p: CommParams) -> float:
    c = p.nvls_consts
    us = c.nvlink_lat
    if kind == "nvls_tree":
        extra_hops = max(0, f.max_switch_hops - 1) * p.nic.switch_hop_us
        us += 2 * int(math.log2(f.nodes)) * (c.net_lat_nvls_tree + extra_hops)  # log2i: floor
    return 2 * (f.ranks - 1) / f.ranks * nbytes / (busbw * 1e9) + us * 1e-6


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
    nv = nvls_busbw(rate, f, params) if algorithm in ("nvls", "auto") else None
    if nv is not None:
        options[nv[0]] = _nvls(nbytes, nv[1], nv[0], f, params)
    if algorithm == "ring":
        name = "ring"
    elif algorithm == "tree":
        name = "tree"
    elif algorithm == "nvls":
        if nv is None:
            raise ValueError("algorithm='nvls' needs NVLink SHARP (CommParams.nvls, NVSwitch gen 3, SM90) "
                             "and at least 2 GPUs per node; use 'auto'")
        name = nv[0]
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
