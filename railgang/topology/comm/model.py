"""The physical communication model's entry points: one collective, concurrent collectives
sharing the fabric, and the communication of one 3D-parallel training step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from railgang.topology.comm.hardware import DGX_A100, DGX_H100, DGX_H200, CommParams
from railgang.topology.comm.nccl import Algorithm, CollectiveTime, allreduce, p2p
from railgang.topology.comm.network import (
    Flows,
    LinkKey,
    fair_rates,
    link_capacity,
    p2p_flows,
    ring_flows,
)
from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth
from railgang.topology.placement.types import Placement, RankSlot

__all__ = ["GENERIC", "allreduce_time", "concurrent_allreduce", "params_for", "step_times"]

Gpu = tuple[str, int]


# A fabric whose GPU type names no known system is modeled on DGX H100 links, but without NVLink
# SHARP: NVLS is opt-in and only where the facts say the nodes have NVSwitch gen 3 (H100/H200 SXM).
GENERIC = DGX_H100.with_(nvls=False)


def params_for(fabric: Fabric) -> CommParams:
    """The named system matching the fabric's GPU type (``a100``, ``h100``, ``h200``; anything
    else: DGX H100 links without NVLS). NVLS stays on only for NVLink (not PCIe) H100/H200 nodes."""
    facts = [fabric.facts(n) for n in fabric.nodes[:1]]
    kind = facts[0].gpu_type.lower() if facts else ""
    nvlink = bool(facts) and facts[0].nvlink and "pcie" not in kind
    if "a100" in kind:
        return DGX_A100
    if "h200" in kind and nvlink:
        return DGX_H200
    if "h100" in kind and nvlink:
        return DGX_H100
    return GENERIC


def _rates(fabric: Fabric, flows: Sequence[Flows], params: CommParams,
           health: LinkHealth | None) -> list[float]:
    capacity: dict[LinkKey, float] = {}
    capped: list[Flows] = []
    for f in flows:
        for link in f.usage:
            if link not in capacity:
                capacity[link] = link_capacity(fabric, params, link, health)
        if health is not None and health.switches:
            # A flow rides one port of each switch it crosses: a degraded switch runs its ports
            # at a fraction of the NIC rate, whatever the aggregate uplink capacity.
            factor = min((health.switches.get(str(link[1]), 1.0) for link in f.usage if link[0] == "sw"),
                         default=1.0)
            if factor < 1.0:
                f = replace(f, cap=min(f.cap, params.nic.gbps * max(factor, 1e-3)))
        capped.append(f)
    return fair_rates(capped, capacity)


def concurrent_allreduce(
    fabric: Fabric,
    groups: Sequence[Sequence[Gpu]],
    nbytes: float | Sequence[float],
    *,
    health: LinkHealth | None = None,
    params: CommParams | None = None,
    algorithm: Algorithm = "auto",
) -> list[CollectiveTime]:
    """All-reduces running at the same time (several jobs, or the DP groups of one job): links
    they share are split max-min fairly; each then runs NCCL's algorithm at its share."""
    p = params or params_for(fabric)
    sizes = [float(nbytes)] * len(groups) if isinstance(nbytes, int | float) else [float(b) for b in nbytes]
    flows = [ring_flows(fabric, g, p) if len(g) > 1 else Flows({}, 0.0, 1, len(g), 1, 1) for g in groups]
    rates = _rates(fabric, flows, p, health)
    return [allreduce(s, r, f, p, algorithm) for s, r, f in zip(sizes, rates, flows, strict=True)]


def allreduce_time(
    fabric: Fabric,
    gpus: Sequence[Gpu],
    nbytes: float,
    *,
    health: LinkHealth | None = None,
    params: CommParams | None = None,
    algorithm: Algorithm = "auto",
    background: Sequence[Sequence[Gpu]] = (),
) -> CollectiveTime:
    """One all-reduce over ``gpus``; ``background`` are other jobs' rings running at the same
    time (each moving data continuously), which take their fair share of shared links."""
    out = concurrent_allreduce(fabric, [gpus, *background], [nbytes] + [1e9] * len(background),
                               health=health, params=params, algorithm=algorithm)
    return out[0]


def _groups(ranks: Sequence[RankSlot], key: str) -> list[list[Gpu]]:
    out: dict[tuple[int, int], list[Gpu]] = {}
    for r in ranks:
        k = (r.pp_stage, r.dp_rank) if key == "tp" else (r.tp_rank, r.pp_stage)
        out.setdefault(k, []).append((r.node, r.gpu))
    return list(out.values())


def step_times(
    fabric: Fabric,
    placement: Placement,
    grad_bytes: float,
    activation_bytes: float,
    *,
    health: LinkHealth | None = None,
    params: CommParams | None = None,
) -> dict[str, float]:
    """Communication of one 3D-parallel step by kind (seconds, no overlap with compute).

    tp: all TP groups all-reduce ``activation_bytes`` at once (the slowest counts); pp: every
    stage boundary of every replica sends ``activation_bytes`` at once; dp: all DP groups
    all-reduce their ``grad_bytes / (tp·pp)`` shard at once, sharing NICs and uplinks.
    """
    p = params or params_for(fabric)
    ranks = placement.ranks
    tp = 1 + max((r.tp_rank for r in ranks), default=0)
    pp = 1 + max((r.pp_stage for r in ranks), default=0)
    t_tp = max((c.seconds for c in concurrent_allreduce(
        fabric, _groups(ranks, "tp"), activation_bytes, health=health, params=p)), default=0.0)
    t_dp = max((c.seconds for c in concurrent_allreduce(
        fabric, _groups(ranks, "dp"), grad_bytes / (tp * pp), health=health, params=p)), default=0.0)
    where = {(r.tp_rank, r.pp_stage, r.dp_rank): (r.node, r.gpu) for r in ranks}
    sends = [(a, b) for (t, s, d), a in where.items() if (b := where.get((t, s + 1, d))) is not None]
    flows = [p2p_flows(fabric, a, b, p) for a, b in sends]
    rates = _rates(fabric, flows, p, health)
    t_pp = max((p2p(activation_bytes, r, f, p).seconds for r, f in zip(rates, flows, strict=True)), default=0.0)
    return {"tp": t_tp, "pp": t_pp, "dp": t_dp, "total": t_tp + t_pp + t_dp}
