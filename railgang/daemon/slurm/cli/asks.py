"""CPUs and memory from Slurm's records (issue 35 item 2): a job's :class:`Ask`, a node's :class:`Room`.

A job's ask is read the same way from ``squeue --json`` and from the narrow ``squeue -O`` read
(narrow.py), from fields both carry:

- ``tres_req_str`` (``-O Tres``): ``cpu=3,mem=3G,node=1,...``, the job's total CPUs and memory
  (``--mem`` per node, ``--mem-per-cpu`` times its CPUs) over its nodes;
- ``memory_per_tres`` / ``cpus_per_tres`` (``-O mem-per-tres`` / ``cpus-per-tres``):
  ``gres:gpu:8192`` for ``--mem-per-gpu=8G``, ``gres:gpu:2`` for ``--cpus-per-gpu=2``: these
  grow with the GPUs a node gives, so the per-node totals then leave memory/CPUs out;
- ``shared`` (``-O OverSubscribe``): ``none`` / ``NO`` for ``--exclusive``.

A node's room is ``real_memory - alloc_memory`` and ``cpus - alloc_cpus`` from ``sinfo --json``:
what every job holds there, railgang's or not. A field that is absent or unreadable gives an
unknown room (None, not checked) rather than a guess.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from railgang.daemon.core.model.room import NO_ASK, Ask, Room

__all__ = ["gpu_type", "job_ask", "node_room"]

_UNIT = {"": 1, "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGT]?)$")
_TYPED = re.compile(r"(?:^|,)gres[:/]gpu:([A-Za-z][\w.\-]*):\d+")
_PER_GPU = re.compile(r"(?:^|,)gres[:/]gpu(?::[^:,]+)?:(\d+)(?:,|$)")
EXCLUSIVE_WORDS = frozenset({"none", "NO", "exclusive"})


def _mb(text: str) -> int:
    m = _MEM.match(text.strip())
    return math.ceil(float(m.group(1)) * _UNIT[m.group(2)]) if m else 0


def _tres(text: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in text.split(",") if "=" in p)


def _per_gpu(value: Any) -> int:
    m = _PER_GPU.search(str(value or ""))
    return int(m.group(1)) if m else 0


def _exclusive(shared: Any) -> bool:
    words = shared if isinstance(shared, list) else [shared]
    return any(str(w) in EXCLUSIVE_WORDS for w in words)


def _set_number(value: Any) -> int | None:
    """A JSON number, or 24.11's ``{"set", "number"}``; None when unset."""
    if isinstance(value, dict):
        value = value.get("number") if value.get("set", True) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and (
        math.isfinite(value)) else None


def job_ask(raw: Mapping[str, Any], nodes: int) -> Ask:
    """The ask of one ``jobs[]`` record over ``nodes`` nodes (``NO_ASK`` when it says nothing)."""
    tres = _tres(str(raw.get("tres_req_str") or ""))
    nodes = max(1, int(tres["node"]) if tres.get("node", "").isdigit() else nodes)
    mem_per_gpu = _per_gpu(raw.get("memory_per_tres"))
    cpus_per_gpu = _per_gpu(raw.get("cpus_per_tres"))
    cpus = int(tres["cpu"]) if tres.get("cpu", "").isdigit() else 0
    # per node, as Slurm counted it at submission (with --mem-per-gpu: its GPUs' share, not this)
    mem = 0 if mem_per_gpu else -(-_mb(tres.get("mem", "")) // nodes)
    if cpus_per_gpu and not mem_per_gpu:
        # its CPUs grow with its GPUs, and so does memory given per CPU (--mem-per-cpu,
        # DefMemPerCPU); the JSON says which it is, the narrow read does not: there memory is
        # taken as per CPU (more than asked, never less) until the next full read
        per_cpu, per_node = _set_number(raw.get("memory_per_cpu")), _set_number(raw.get("memory_per_node"))
        if "memory_per_cpu" in raw or "memory_per_node" in raw:
            mem_per_gpu, mem = (per_cpu or 0) * cpus_per_gpu, per_node or 0
        else:
            mem_per_gpu, mem = -(-mem // max(1, cpus)) * cpus_per_gpu, 0
    ask = Ask(cpus=0 if cpus_per_gpu else -(-cpus // nodes),
              mem_mb=mem,
              cpus_per_gpu=cpus_per_gpu, mem_mb_per_gpu=mem_per_gpu,
              exclusive=_exclusive(raw.get("shared")))
    return NO_ASK if ask.empty else ask


def node_room(raw: Mapping[str, Any]) -> Room | None:
    """Free CPUs and memory of one ``sinfo --json`` node (None when it does not say)."""
    try:
        total_cpus, total_mem = int(raw["cpus"]), int(raw["real_memory"])
        used_cpus, used_mem = int(raw.get("alloc_cpus") or 0), int(raw.get("alloc_memory") or 0)
    except (KeyError, TypeError, ValueError):
        return None
    if total_cpus <= 0 or total_mem <= 0:
        return None
    return Room(max(0, total_cpus - used_cpus), max(0, total_mem - used_mem),
                idle=used_cpus == 0)


def gpu_type(raw: Mapping[str, Any]) -> str:
    """The GPU type a job asks for (``--gres=gpu:h100:8``, ``--gpus=h100:8``), "" for any."""
    for key in ("tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket"):
        m = _TYPED.search(str(raw.get(key) or ""))
        if m:
            return m.group(1).lower()
    return ""
