"""The GPU catalogue: one table of the GPU types railgang knows, by Slurm GRES type name.

Every place that needs a fact about a GPU type reads it here (issue 22: the catalogue was defined
five times, and an A100 had 40 GB in one and 80 GB in another). Two memory columns, because two
questions are asked:

- ``min_memory_gb``: the smallest memory the type was sold with. A job's ``gpumem>=`` need is
  checked against this when Slurm tells only the type (``daemon/slurm/cli/facts.py``): a need is
  never met by a guess, so a plain ``a100`` is the 40 GB part until a ``gpumem_80g`` node feature
  says otherwise.
- ``memory_gb``, ``nvlink``, ``network``: the common SKU, the one a node of this type gets where
  railgang builds nodes itself (the test cluster's pools, the simulator's pools, ``topology
  generate``) and what the report's "over-specified: a smaller type" advice compares against.

``speed`` is the training throughput relative to a V100 used for jobs without measured per-type
rates (``daemon/core/model/pools.py``): K80 and P100 are the medians over the (model, size) pairs
Gavel measured on both (simulation_throughputs.json: K80 0.21 of 80 pairs, P100 0.76 of 83);
newer NVIDIA types are vendor training-throughput ratios, rounded; A40, MI250X and MI300X (no
vendor training ratio against these) are the A100's or H100's entry scaled by peak dense FP16
tensor throughput, a rougher figure.

Memory and compute capability are NVIDIA's and AMD's data sheets (per GPU; a K80 board is two
12 GB GPUs; the GB200 superchip's Blackwell GPUs have 186 GB each).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class GpuType:
    """What railgang knows of one GPU type (see the module docstring for each column)."""

    name: str  # Slurm GRES type name, lower case
    min_memory_gb: float
    memory_gb: float  # the common SKU's
    compute_capability: tuple[int, int] | None  # None: not an NVIDIA part
    speed: float  # training throughput relative to a V100
    nvlink: bool  # the common SKU's GPUs talk over NVLink (SXM), not only PCIe
    network: str  # the interconnect nodes of the common SKU usually have: ib, roce or eth


def _t(name: str, min_gb: float, gb: float, cc: tuple[int, int] | None, speed: float,
       nvlink: bool, network: str) -> GpuType:
    return GpuType(name, min_gb, gb, cc, speed, nvlink, network)


GPU_TYPES: Mapping[str, GpuType] = MappingProxyType({t.name: t for t in (
    _t("k80", 12.0, 12.0, (3, 7), 0.21, False, "eth"),
    _t("p100", 12.0, 16.0, (6, 0), 0.76, False, "eth"),
    _t("v100", 16.0, 32.0, (7, 0), 1.0, False, "eth"),  # the PCIe generation most sites kept
    _t("t4", 16.0, 16.0, (7, 5), 0.45, False, "eth"),
    _t("a10", 24.0, 24.0, (8, 6), 0.9, False, "eth"),
    _t("a40", 48.0, 48.0, (8, 6), 1.0, False, "eth"),
    _t("l4", 24.0, 24.0, (8, 9), 0.6, False, "eth"),
    _t("l40s", 48.0, 48.0, (8, 9), 1.6, False, "eth"),
    _t("a100", 40.0, 80.0, (8, 0), 2.0, True, "ib"),
    _t("a100-40", 40.0, 40.0, (8, 0), 2.0, True, "roce"),
    _t("a100-80", 80.0, 80.0, (8, 0), 2.0, True, "ib"),
    _t("h100", 80.0, 80.0, (9, 0), 3.5, True, "ib"),
    _t("h200", 141.0, 141.0, (9, 0), 4.0, True, "ib"),
    _t("b200", 180.0, 180.0, (10, 0), 7.0, True, "ib"),
    _t("gb200", 186.0, 186.0, (10, 0), 7.0, True, "ib"),
    _t("mi250x", 64.0, 64.0, None, 0.7, False, "roce"),  # per GCD (two per package)
    _t("mi300x", 192.0, 192.0, None, 4.6, False, "roce"),
)})

# GRES names sites use for the same parts (Slurm type names are free text)
ALIASES: Mapping[str, str] = MappingProxyType({"a100_40g": "a100-40", "a100_80g": "a100-80",
                                               "a100-sxm4-80gb": "a100-80", "h100-sxm": "h100"})


def gpu_type(name: str) -> GpuType | None:
    """The catalogue's entry for the GRES type ``name`` (any case, aliases followed), or None."""
    key = name.lower()
    return GPU_TYPES.get(ALIASES.get(key, key))


def speed_of(name: str) -> float:
    """Relative training speed of ``name`` (1.0, a V100's, when the type is unknown)."""
    known = gpu_type(name)
    return known.speed if known is not None else 1.0


__all__ = ["ALIASES", "GPU_TYPES", "GpuType", "gpu_type", "speed_of"]
