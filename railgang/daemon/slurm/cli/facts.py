"""Node facts from Slurm (typed GRES + node features) and the fleet file ``job_submit.lua`` reads.

Facts (``railgang.daemon.core.model.needs.GpuFacts``) come from what an admin already writes in
slurm.conf, no extra inventory:

- GPU type: the typed GRES, ``Gres=gpu:a100:8`` -> ``a100`` (untyped ``gpu:8`` -> unknown).
- memory per GPU: feature ``gpumem_80g`` (or ``gpumem_80``, GB); else the smallest memory the
  type ships with (``min_memory_gb`` of the GPU catalogue, ``topology/gpus.py``: an A100 may be the 40 GB one), else unknown.
- NVLink: feature ``nvlink`` (or an ``nvl_<domain>`` feature); without it, none.
- interconnect: feature ``ib``, ``roce`` or ``eth``; else unknown.
- compute capability: feature ``cc80`` / ``sm_80`` (8.0; ``cc100`` is 10.0); else by type.

Capacity tier (``Node.tier``, not a need: Slurm reports no tiers or prices): feature
``tier_spot``, ``tier_ondemand`` or ``tier_reserved``; without one, "" (owned, unpriced). The
tiers' prices come from ``[slurm] prices`` in the syntax of ``railgang sim --price``
(:func:`tier_terms`, defaults from the simulator's list prices), spot's interruption process from
``[slurm] spot_interruptions_per_node_day`` / ``spot_notice_s`` (docs/needs.md).

The fleet file lists each kind of node once, so ``job_submit.lua`` (no network, no Slurm API for
nodes in 22.05) can refuse a need no node meets and say what exists. One line per kind::

    n[01-04] nodes=4 gpus=8 type=a100 gpumem=80 nvlink=1 net=ib cc=8.0

(``-`` for an unknown fact). The daemon rewrites it when the facts change (atomic rename, never a
half-written file); ``railgang devcluster up`` writes it once the nodes registered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from railgang.daemon.core.model.needs import NETWORKS, GpuFacts
from railgang.daemon.core.model.tiers import ON_DEMAND, RESERVED, SPOT, TierTerms
from railgang.daemon.pricing import parse_prices
from railgang.daemon.pricing import tier_terms as _priced
from railgang.topology import hostnames
from railgang.topology.gpus import gpu_type as gpu_type_facts

__all__ = ["TIER_BY_FEATURE", "facts_from_slurm",
           "render_fleet_file", "tier_from_features", "tier_terms"]

# node feature -> capacity tier (Slurm feature names: no hyphen in "ondemand")
TIER_BY_FEATURE = {"tier_reserved": RESERVED, "tier_ondemand": ON_DEMAND, "tier_spot": SPOT}

_GRES_TYPE = re.compile(r"(?:^|,)(?:gres[:/])?gpu:([A-Za-z][\w.\-]*):\d+")
_MEM = re.compile(r"^gpumem_?(\d+(?:\.\d+)?)(?:g|gb)?$")
_CC = re.compile(r"^(?:cc|sm_?)(\d{1,2})(\d)$")


def facts_from_slurm(gres: str, features: Iterable[str]) -> GpuFacts:
    """A node's facts from its ``gres`` (sinfo/scontrol) and its active features."""
    m = _GRES_TYPE.search(gres or "")
    gpu_type = m.group(1).lower() if m else ""
    known = gpu_type_facts(gpu_type)  # the smallest memory it was sold with: never a guess
    mem = known.min_memory_gb if known is not None else 0.0
    cc = known.compute_capability if known is not None else None
    nvlink, net = False, ""
    for raw in features:
        f = raw.strip().lower()
        if (mm := _MEM.match(f)) is not None:
            mem = float(mm.group(1))
        elif (c := _CC.match(f)) is not None:
            cc = (int(c.group(1)), int(c.group(2)))
        elif f == "nvlink" or (f.startswith("nvl_") and len(f) > 4):
            nvlink = True
        elif f in NETWORKS:
            net = f
    return GpuFacts(gpu_type, mem, nvlink, net, cc)


def tier_from_features(features: Iterable[str]) -> str:
    """A node's capacity tier from its ``tier_*`` feature ("" without one: owned, unpriced)."""
    for raw in features:
        tier = TIER_BY_FEATURE.get(raw.strip().lower())
        if tier is not None:
            return tier
    return ""


def tier_terms(pools: Iterable[tuple[str, str]], prices: str = "", spot_per_node_day: float = 0.0,
               spot_notice_s: float = 120.0) -> dict[str, TierTerms]:
    """``Snapshot.tiers`` for the (GPU type, tier) pools of a cluster: each tier present (and
    on-demand, spot's yardstick) priced per type as ``railgang sim --price`` would price it;
    empty when no node names a tier (no prices, routing as before). ConfigError on bad prices."""
    pools = set(pools)
    present = {tier for _, tier in pools if tier}
    if not present:
        return {}
    return _priced((gpu_type for gpu_type, _ in pools), present, parse_prices(prices),
                   spot_per_node_day=spot_per_node_day, spot_notice_s=spot_notice_s)


def _line(names: list[str], gpus: int, f: GpuFacts) -> str:
    cc = "{}.{}".format(*f.compute_capability) if f.compute_capability else "-"
    return (f"{hostnames.collect(names)} nodes={len(names)} gpus={gpus} type={f.gpu_type or '-'} "
            f"gpumem={f.gpu_mem_gb:g} nvlink={int(f.nvlink)} net={f.interconnect or '-'} cc={cc}")


def render_fleet_file(nodes: Iterable[tuple[str, int, GpuFacts]]) -> str:
    """The fleet file for (name, GPUs, facts) of every node: one sorted line per kind of node,
    so the same fleet always gives the same bytes (and no rewrite)."""
    kinds: dict[tuple[int, GpuFacts], list[str]] = {}
    for name, gpus, facts in nodes:
        kinds.setdefault((gpus, facts), []).append(name)
    lines = sorted(_line(sorted(names), gpus, f) for (gpus, f), names in kinds.items())
    return ("# railgang fleet: one line per kind of node (written from sinfo by the railgang "
            "daemon; read by job_submit.lua)\n" + "".join(line + "\n" for line in lines))


