"""Pools (GPU types): their size, which GPUs jobs held when, and fragmentation (R-T9).

A pool's size comes from ``report.pool_gpus`` when the admin gave it, else from the GPUs that
sent telemetry on the pool's nodes, else from the most GPUs the pool ever had allocated at once
(then utilisation reads 100 % at that peak: the report says which source it used).

Fragmentation is measured at ``report.fragmentation_samples`` instants of the day with
``topology.fragmentation.fragmentation_index``: the free GPUs of the pool against the gangs
waiting at that instant (a whole-node gang when none wait). The index is the mean over the
instants; stranded GPU-hours count only instants when jobs were waiting.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from railgang.daemon.report.data import QueuedJob, Seg
from railgang.topology import hostnames
from railgang.topology.fabric import Fabric, NodeFacts
from railgang.topology.fragmentation import fragmentation_index
from railgang.topology.placement.types import GangRequest


def seg_gpus(seg: Seg, gpus_per_node: dict[str, int]) -> dict[str, list[int]] | None:
    """node -> GPU indices the segment held; None when the ledger does not know which (and the
    segment does not take whole nodes)."""
    nodes = hostnames.expand(seg.nodes)
    if not nodes:
        return None
    if seg.gpu_ids:
        out: dict[str, list[int]] = defaultdict(list)
        for part in filter(None, seg.gpu_ids.split(",")):
            node, _, idx = part.partition(":")
            lo, _, hi = idx.partition("-")
            out[node] += list(range(int(lo), int(hi or lo) + 1))
        return dict(out)
    whole = sum(gpus_per_node.get(n, 0) for n in nodes)
    if whole == seg.gpus:
        return {n: list(range(gpus_per_node[n])) for n in nodes}
    return None


def node_sizes(segments: Sequence[Seg], telemetry_keys: Sequence[str],
               default: int = 8) -> dict[str, int]:
    """GPUs per node: the highest index seen in telemetry or the ledger, else ``default``."""
    size: dict[str, int] = {}
    for key in telemetry_keys:
        node, _, gpu = key.rpartition(":")
        size[node] = max(size.get(node, 0), int(gpu) + 1)
    for seg in segments:
        nodes = hostnames.expand(seg.nodes)
        for part in filter(None, seg.gpu_ids.split(",")):
            node, _, idx = part.partition(":")
            size[node] = max(size.get(node, 0), int(idx.rpartition("-")[2] or 0) + 1)
        for n in nodes:
            size.setdefault(n, max(default, -(-seg.gpus // max(1, len(nodes)))))
    return size


def pool_nodes(segments: Sequence[Seg]) -> dict[str, list[str]]:
    """pool -> its nodes (a node belongs to the GPU type most of its segments had)."""
    votes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for seg in segments:
        for n in hostnames.expand(seg.nodes):
            votes[n][seg.gpu_type] += 1
    out: dict[str, list[str]] = defaultdict(list)
    for node, v in sorted(votes.items()):
        out[max(sorted(v), key=lambda k: v[k])].append(node)
    return dict(out)


def peak_allocation(segments: Sequence[Seg], since: int, until: int) -> int:
    events: list[tuple[int, int]] = []
    for g in segments:
        events.append((max(g.start, since), g.gpus))
        events.append((min(g.end if g.end is not None else until, until), -g.gpus))
    peak = cur = 0
    for _, d in sorted(events, key=lambda e: (e[0], e[1])):
        cur += d
        peak = max(peak, cur)
    return peak


def flat_fabric(pool: str, nodes: Sequence[str], sizes: dict[str, int]) -> Fabric:
    """One leaf holding the pool's nodes (when no topology.conf is configured)."""
    return Fabric({}, {f"{pool}-leaf": list(nodes)},
                  {n: NodeFacts(n, gpus=sizes[n], gpu_type=pool) for n in nodes})


def fragmentation(pool_segs: Sequence[Seg], nodes: Sequence[str], sizes: dict[str, int],
                  queue: Sequence[QueuedJob], since: int, until: int, samples: int,
                  fabric: Fabric | None = None) -> tuple[float | None, float | None]:
    """(mean index, stranded GPU-hours while jobs waited) of one pool over the window."""
    if not nodes:
        return None, None
    fab = fabric if fabric is not None else flat_fabric("pool", nodes, sizes)
    step = (until - since) / samples
    indexes: list[float] = []
    stranded_h = 0.0
    for k in range(samples):
        t = since + (k + 0.5) * step
        busy: dict[str, set[int]] = defaultdict(set)
        for g in pool_segs:
            if g.start <= t and (g.end is None or t < g.end):
                held = seg_gpus(g, sizes)
                if held is None:  # indices unknown: take the lowest free ones, per node
                    ns = hostnames.expand(g.nodes)
                    per = g.gpus // max(1, len(ns))
                    held = {n: [i for i in range(sizes.get(n, 0)) if i not in busy[n]][:per]
                            for n in ns}
                for n, idx in held.items():
                    busy[n].update(idx)
        free = {n: frozenset(set(range(sizes[n])) - busy[n]) for n in nodes}
        waiting = [j for j in queue if j.submitted <= t and (j.first_start is None or
                                                            t < j.first_start)]
        gangs = sorted({GangRequest(gpus=j.gpus) for j in waiting}, key=lambda g: g.gpus)
        frag = fragmentation_index(fab, free, gangs)
        indexes.append(frag.index)
        if waiting:
            stranded_h += frag.stranded_gpus * step / 3600
    return sum(indexes) / len(indexes), stranded_h


__all__ = ["flat_fabric", "fragmentation", "node_sizes", "peak_allocation", "pool_nodes",
           "seg_gpus"]
