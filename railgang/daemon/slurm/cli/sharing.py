"""Jobs that share GPUs (``--gres=shard:N``, ``--gres=mps:N``) are left to Slurm's own placement
(issue 35 item 3; docs/slurm-backend.md, "Shared GPUs").

Why not the packer ``topology/shards.py`` measures: a Start can pin a job to nodes
(``ReqNodeList``), never to one GPU of a node, so the packer's choice of GPU (the best fit
among shared GPUs, which is where its gain comes from) is Slurm's anyway; and the core counts whole
GPUs, a shard job holds a slice. So a waiting hinted job that asks for a sharing GRES is left to
Slurm (its lease released, ``explain`` says why), and a running one is no railgang job: its GPUs
count as taken for whole-GPU work, one per node it runs on unless Slurm names them (Slurm gives
a GPU either as ``gpu`` or as shards, not both; by default one job's shards on a node come from
one GPU). That may undercount free GPUs where two such jobs share one GPU; it never offers a GPU
Slurm would refuse a Start on.

Pure: records in, strings and index sets out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SHARING_GRES", "hold_shared_gpus", "shared_gpus_rule", "sharing_request"]

SHARING_GRES = ("shard", "mps")
# gres:shard:2 (22.05), gres/shard:2 (24.11), shard:2, gres:mps:50, a typed gres:shard:a100:2
_SHARING = re.compile(r"(?:^|,)\s*(?:gres[:/])?(shard|mps)(?::[\w.-]+)?[:=](\d+)")


def sharing_request(raw: Mapping[str, Any]) -> str:
    """The sharing GRES a squeue record asks for (``shard:2``), "" for none."""
    for kind in ("job", "node", "task", "socket"):
        found = _SHARING.search(str(raw.get(f"tres_per_{kind}") or ""))
        if found:
            return f"{found.group(1)}:{found.group(2)}"
    return ""


def shared_gpus_rule(shares: str) -> str:
    """Why a waiting job that shares GPUs is left to Slurm ("" when it shares none)."""
    if not shares:
        return ""
    return (f"it asks for shared GPUs (--gres={shares}): Slurm places GPU shards and MPS itself, "
            "railgang places whole GPUs")


def hold_shared_gpus(allocation: Iterable[tuple[str, tuple[int, ...]]], gpus: Mapping[str, int],
                     used: dict[str, set[int]]) -> None:
    """Mark in ``used`` the GPUs a running sharing job holds: those Slurm names, else one per
    node (the lowest not yet taken)."""
    for node, idx in allocation:
        taken = used.setdefault(node, set())
        if idx:
            taken.update(idx)
            continue
        spare = next((g for g in range(gpus.get(node, 0)) if g not in taken), None)
        if spare is not None:
            taken.add(spare)
