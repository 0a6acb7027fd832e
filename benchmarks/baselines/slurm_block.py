"""The honest baseline on blocks: where Slurm 24.11's topology/block puts a whole-node gang.

A transcription of ``eval_nodes_block`` and ``_choose_best_bblock``
(src/plugins/topology/block/eval_nodes_block.c, tag slurm-24-11-5-1) for the jobs NVL72 sites
submit, ``--nodes=N --gres=gpu:<all>`` (optionally ``--segment=S``): every usable node (not
drained, all GPUs free) has the same scheduling weight, so the weight groups of the C code are
one group and the "required nodes" paths are never taken.

1. Levels: ``BlockSizes`` (base size b, levels k with b·2^k nodes; without it levels 0-4) and
   the aggregated blocks slurmctld builds from consecutive base blocks (``block_record_validate``).
2. For ``rem`` nodes (one segment at a time with ``--segment``): the smallest configured level
   whose blocks hold ``ceil(rem / b)`` base blocks (none: the whole fabric is one block), and
   the next lower level ("llblock"), of which at most ``ceil(rem / llblock size)`` may be used.
3. The block: among those whose usable nodes suffice (counting only the fullest ``max_llblock``
   llblocks), the one with the *fewest* usable nodes; at equal count the *later* one.
4. Base blocks inside it, one at a time (``_choose_best_bblock``): prefer one in an llblock
   already used, then an llblock that alone covers what is left (the smallest such), else the
   fullest; then a base block that covers what is left (the smallest), else the fullest; ties
   keep the later one. Nodes of a base block are taken in bitmap (name) order.
5. Segments repeat 2-4 on what is left; a segment larger than the base block is refused.
6. ``--exclusive=topo``: only base blocks without any running job are usable
   (``exclusive_topo_usable``; from the recorded states, not from the source).

Checked against states recorded on the real slurmctld 24.11 (benchmarks/slurm/block_states.py,
tests/topology/data/slurm_block_states.json, replayed by tests/topology/test_slurm_block.py).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = ["BlockLayout", "exclusive_topo_usable", "segment_size", "slurm_block_nodes"]


@dataclass(frozen=True)
class BlockLayout:
    """Base blocks in file order (each its nodes in slurm.conf order) and the BlockSizes."""

    blocks: tuple[tuple[str, ...], ...]
    block_sizes: tuple[int, ...] = ()  # empty: slurmctld's default levels 0-4 of the first block

    @property
    def base(self) -> int:
        return self.block_sizes[0] if self.block_sizes else len(self.blocks[0])

    @property
    def levels(self) -> tuple[int, ...]:
        """Configured levels (log2 of base blocks per block): eval_nodes_block reads the whole
        ``block_levels`` bitmap, also levels larger than the fabric."""
        wanted = [s // self.base for s in self.block_sizes] if self.block_sizes else [1, 2, 4, 8, 16]
        return tuple(sorted({per.bit_length() - 1 for per in wanted}))


def _ffs_from(levels: Collection[int], k: int) -> int:
    return min((x for x in levels if x >= k), default=-1)


def _fls_upto(levels: Collection[int], k: int) -> int:
    return max((x for x in levels if x <= k), default=-1)


def slurm_block_nodes(layout: BlockLayout, usable: Collection[str], nodes: int,
                      segment: int = 0) -> list[str] | None:
    """The nodes slurmctld 24.11 gives a ``--nodes=nodes`` job (None: it stays pending)."""
    base = layout.base
    if segment and (segment > base or nodes % segment):
        return None
    free = set(usable)
    taken: list[str] = []
    for _ in range(nodes // segment if segment else 1):
        got = _one(layout, free, segment or nodes)
        if got is None:
            return None
        taken += got
        free -= set(got)
    order = {n: i for i, n in enumerate(n for blk in layout.blocks for n in blk)}
    return sorted(taken, key=order.__getitem__)


def _one(layout: BlockLayout, free: set[str], rem: int) -> list[str] | None:
    base, blocks, levels = layout.base, layout.blocks, layout.levels
    count = len(blocks)
    per_block_wanted = -(-rem // base)
    level = (per_block_wanted - 1).bit_length()  # ceil(log2)
    ll_level = max(_fls_upto(levels, level - 1), 0) if level > 0 else 0
    level = _ffs_from(levels, level)
    per_ll = 1 << ll_level
    max_ll = -(-rem // (per_ll * base))
    per_block, block_cnt = (count, 1) if level < 0 else (1 << level, -(-count // (1 << level)))
    use_ll = per_block != per_ll * max_ll
    on_b = [sum(1 for n in blk if n in free) for blk in blocks]
    ll_cnt = -(-count // per_ll)
    on_ll = [sum(on_b[i] for i in range(j * per_ll, min((j + 1) * per_ll, count))) for j in range(ll_cnt)]
    best, best_cnt = -1, 0
    for b in range(block_cnt):
        bnc = sum(on_b[i] for i in range(b * per_block, min((b + 1) * per_block, count)))
        avail = bnc
        if use_ll:
            per = per_block // per_ll
            mine = sorted(on_ll[b * per:min((b + 1) * per, ll_cnt)], reverse=True)
            avail = sum(mine[:max_ll])
        if avail < rem:
            continue
        if best == -1 or bnc <= best_cnt:
            best, best_cnt = b, bnc
    if best == -1:
        return None
    inside = [i for i in range(count) if i // per_block == best]
    return _fill(blocks, free, inside, rem, ll_level if use_ll else None, max_ll)


def _fill(blocks: Sequence[Sequence[str]], free: set[str], inside: list[int], rem: int,
          ll_level: int | None, max_ll: int) -> list[str] | None:
    on_b = {i: [n for n in blocks[i] if n in free] for i in inside}
    on_ll: dict[int, int] = {}
    if ll_level is not None:
        for i in inside:
            on_ll[i >> ll_level] = on_ll.get(i >> ll_level, 0) + len(on_b[i])
    required: set[int] = set()
    taken: list[str] = []
    prev = rem + 1
    while rem > 0 and prev != rem:  # a pass that adds no node ends it ("Stalled")
        prev = rem
        pick, same = _choose(inside, required, on_b, on_ll, ll_level, rem)
        if pick == -1 or (max_ll <= 0 and not same):
            break
        required.add(pick)
        for n in on_b[pick]:
            taken.append(n)
            rem -= 1
            if rem == 0:
                return taken
        if not same:
            max_ll -= 1
    return None


def _choose(inside: list[int], required: set[int], on_b: dict[int, list[str]], on_ll: dict[int, int],
            ll_level: int | None, rem: int) -> tuple[int, bool]:
    """``_choose_best_bblock`` over the candidates in index order: (best, its same_block)."""
    best, best_fit, best_same = -1, False, True
    for i in inside:
        if i in required:
            continue
        fit = len(on_b[i]) >= rem
        if ll_level is not None and (best == -1 or (best >> ll_level) != (i >> ll_level)):
            same = any((j >> ll_level) == (i >> ll_level) for j in required)
            if best == -1 or (same and not best_same):
                best, best_fit, best_same = i, fit, same
                continue
            if not same and best_same:
                continue
            cnt, best_ll = on_ll[i >> ll_level], on_ll[best >> ll_level]
            ll_fit, best_ll_fit = cnt >= rem, best_ll >= rem
            if ll_fit != best_ll_fit:
                if ll_fit:
                    best, best_fit, best_same = i, fit, same
                continue
            if cnt != best_ll:
                if (cnt < best_ll) == ll_fit:  # both fit: fewer nodes; neither: more nodes
                    best, best_fit, best_same = i, fit, same
                continue
        n, bn = len(on_b[i]), len(on_b[best]) if best != -1 else 0
        if best == -1 or (fit and not best_fit) or (not fit and not best_fit and n >= bn) or (fit and n <= bn):
            best, best_fit = i, fit
    return best, best_same


def segment_size(nodes: int, tp: int, pp: int, gpus_per_node: int, base: int) -> int:
    """``--segment`` for a whole-node gang of ``nodes`` with ``--rg-parallel=tp,pp,…``: the nodes
    of one TP x PP replica (each replica's pipeline then stays in one block), or 0 (no segment)
    when a replica is not whole nodes, is larger than the base block, is the whole job, or does
    not divide it (24.11 refuses such a job)."""
    if tp * pp % gpus_per_node:
        return 0
    replica = tp * pp // gpus_per_node
    return replica if 0 < replica <= base and replica < nodes and nodes % replica == 0 else 0


def exclusive_topo_usable(layout: BlockLayout, usable: Collection[str], with_jobs: Collection[str]) -> set[str]:
    """What ``--exclusive=topo`` leaves usable: only base blocks where no job runs (seen on the
    real slurmctld 24.11: 6 of 6 recorded states; a drained node does not spoil its block)."""
    busy = set(with_jobs)
    return {n for blk in layout.blocks if not busy.intersection(blk) for n in blk} & set(usable)
