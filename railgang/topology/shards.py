"""Small work sharing GPUs: where a job asking for Slurm ``shard`` GRES goes (issue 19 item 6).

Slurm 22.05's ``shard`` GRES splits each GPU into ``shards_per_gpu`` slices that several small
inference or development jobs share. Where they land decides what is left for gangs: a GPU with
one shard in use is lost to whole-GPU work, and a node with one such GPU is lost to an 8-GPU
gang. :func:`place_shards` packs them:

1. a GPU already shared, with room, on the node that already holds the most shard work — the
   *best fit*: the fewest free shards that still hold the request, so large holes stay large;
2. else a fresh GPU on the node with the most GPUs already shared or busy (never opening a
   wholly free node while a partly used one has a free GPU);
3. ties by node name, then GPU index (deterministic).

The baselines of the benchmark (``benchmarks/topology/shard_packing.py``): ``first_fit`` (nodes in name
order, the first GPU with room: select/cons_tres's order) and ``spread`` (the least loaded node:
the usual default of a scheduler that balances). Pure functions over plain mappings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Strategy = Literal["pack", "first_fit", "spread"]
STRATEGIES: tuple[Strategy, ...] = ("pack", "first_fit", "spread")


@dataclass(frozen=True, slots=True)
class ShardSlot:
    node: str
    gpu: int


Used = Mapping[str, Mapping[int, int]]  # node -> GPU -> shards in use (absent: 0)


def place_shards(used: Used, gpus_per_node: Mapping[str, int], shards_per_gpu: int, need: int,
                 strategy: Strategy = "pack", busy: Mapping[str, int] | None = None,
                 ) -> ShardSlot | None:
    """A GPU with ``need`` free shards, or None. ``busy``: GPUs per node held whole by other
    work (never shared)."""
    if not 1 <= need <= shards_per_gpu:
        return None
    busy = busy or {}
    best: tuple[tuple[int | str, ...], ShardSlot] | None = None
    for node in sorted(gpus_per_node):
        per = used.get(node, {})
        whole = busy.get(node, 0)
        touched = sum(1 for g in per.values() if g) + whole
        load = sum(per.values())
        for gpu in range(whole, gpus_per_node[node]):
            free = shards_per_gpu - per.get(gpu, 0)
            if free < need:
                continue
            shared = free < shards_per_gpu
            if strategy == "first_fit":
                return ShardSlot(node, gpu)
            if strategy == "spread":
                key: tuple[int | str, ...] = (load, -free, node, gpu)
            else:  # pack: a shared GPU first (best fit), then the fullest node
                key = (0 if shared else 1, free if shared else 0, -touched, -load, node, gpu)
            if best is None or key < best[0]:
                best = (key, ShardSlot(node, gpu))
    return best[1] if best is not None else None


@dataclass(frozen=True, slots=True)
class Footprint:
    """What shard work takes from the rest of the cluster at one moment."""

    gpus: int  # GPUs with any shard in use: lost to whole-GPU work
    partial: int  # of those, GPUs with free shards left (the stranded part of a GPU)
    nodes: int  # nodes with any shard in use: lost to a whole-node gang
    min_gpus: int  # the fewest GPUs the shards in use could fit on

    @property
    def stranded_gpus(self) -> int:
        """GPUs taken beyond the fewest the shards need."""
        return self.gpus - self.min_gpus


def footprint(used: Used, shards_per_gpu: int) -> Footprint:
    counts = [n for per in used.values() for n in per.values() if n > 0]
    nodes = sum(1 for per in used.values() if any(per.values()))
    return Footprint(len(counts), sum(1 for n in counts if n < shards_per_gpu), nodes,
                     -(-sum(counts) // shards_per_gpu))


__all__ = ["STRATEGIES", "Footprint", "ShardSlot", "Strategy", "footprint", "place_shards"]
