"""One way to know a node (issue 34 item 5): its placement facts (``fabric.NodeFacts``) from what
Slurm says of it — the GPU count, the typed GRES, the node features — filled from the GPU catalogue
(``topology/gpus.py``) where Slurm is silent. The daemon's fabric (the CLI backend, from sinfo), the
offline tools (``scontrol``/``sinfo --json``) and the simulator's pools (a type and a count) all
build their nodes here, so a tensor-parallel job on PCIe-only nodes meets the same rule in the
simulator and on the cluster.

The rules, in order: a ``gpumem_<GB>`` feature (``gpumem_80g``, as ``slurm/cli/facts.py`` reads it) gives the memory per GPU, ``pcie``/``no_nvlink`` or
``nvlink`` say whether the GPUs talk over NVLink, ``nvl_<domain>`` names a multi-node NVLink domain;
else the catalogue's common SKU of the type (a V100 is its PCIe part, an H100 the SXM one); a type
the catalogue does not know reads as an 80 GB NVLink part, so an untyped ``gpu:8`` cluster places
as it always did.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from railgang.topology.fabric import NodeFacts
from railgang.topology.gpus import gpu_type as catalogue_entry

__all__ = ["node_facts", "node_facts_from_gres"]

UNKNOWN_TYPE = "gpu"  # the type of an untyped GRES (``gpu:8``)
_MEM = re.compile(r"^gpumem_?(\d+(?:\.\d+)?)(?:g|gb)?$")  # gpumem_80g, gpumem_80 (GB)
_GRES = re.compile(r"(?:^|,)(?:gres[:/])?gpu(?::([A-Za-z0-9_.\-]+))?:(\d+)")


def node_facts(name: str, gpus: int, gpu_type: str = UNKNOWN_TYPE,
               features: Iterable[str] = ()) -> NodeFacts:
    """The placement facts of node ``name`` with ``gpus`` GPUs of ``gpu_type`` and ``features``."""
    known = catalogue_entry(gpu_type)
    mem = known.memory_gb if known is not None else 80.0
    nvlink = known.nvlink if known is not None else True
    domain = None
    kept = tuple(features)
    for feat in kept:
        f = feat.strip().lower()
        if (m := _MEM.match(f)) is not None and float(m.group(1)) > 0:
            mem = float(m.group(1))
        elif f in ("pcie", "no_nvlink"):
            nvlink = False
        elif f == "nvlink":
            nvlink = True
        elif f.startswith("nvl_") and len(f) > 4:
            domain = feat.strip()[4:]
    return NodeFacts(name, max(gpus, 1), gpu_type, mem, domain, nvlink, frozenset(kept))


def node_facts_from_gres(name: str, gres: str, features: Iterable[str], gpus: int | None = None,
                         default_gpus: int = 8) -> NodeFacts:
    """A node's facts from its GRES text as Slurm prints it (``gpu:h100:8(S:0-1)``): the type it
    names (untyped: unknown); ``gpus`` when the caller knows the count better (sinfo's own), else
    the GRES count, else ``default_gpus``."""
    m = _GRES.search(gres or "")
    gpu_type = (m.group(1) or UNKNOWN_TYPE).lower() if m else UNKNOWN_TYPE
    count = gpus if gpus is not None else (int(m.group(2)) if m else default_gpus)
    return node_facts(name, count, gpu_type, features)
