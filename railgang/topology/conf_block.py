"""topology/block lines of ``topology.conf`` (Slurm 23.11+): ``BlockName=… Nodes=…`` and one
``BlockSizes=…``.

Slurm 22.05 has no topology/block, so these rules are railgang's reading of the 23.11
documentation, not checked against a slurmctld (the conformance test covers topology/tree only).
The lexical rules are the same as for tree lines (``slurm_syntax``). ``conf`` imports this
module only when a file has block lines, so importing ``conf`` here is no cycle.
"""

from __future__ import annotations

from collections.abc import Callable

from railgang.topology.conf import MAX_RANGE, BlockDef
from railgang.topology.slurm_syntax import host_list, next_pair

__all__ = ["parse_blocks"]

ErrorFn = Callable[..., None]  # _Report.error(line, field, message, switch=None)


def parse_blocks(lines: list[tuple[int, str]], error: ErrorFn) -> tuple[tuple[BlockDef, ...], tuple[int, ...]]:
    """Blocks and block sizes of the logical ``lines`` (all start with BlockName= or BlockSizes=)."""
    blocks: list[BlockDef] = []
    sizes: tuple[int, ...] = ()
    sizes_line: int | None = None
    for number, body in lines:
        pairs = []
        rest = body
        while (kv := next_pair(rest)) is not None:
            pairs.append((kv.key, kv.value))
            rest = kv.rest
        if rest.strip():
            error(number, None, f"expected key=value, got {rest.strip()[:80]!r}")
        head_key, name = pairs[0]
        if head_key.lower() == "blocksizes":
            if len(pairs) > 1:
                error(number, pairs[1][0], "unknown key after BlockSizes=")
            if sizes_line is not None:
                error(number, "BlockSizes", f"given twice (first on line {sizes_line})")
                continue
            sizes_line = number
            sizes = _block_sizes(name, number, error)
            continue
        nodes: tuple[str, ...] = ()
        seen: set[str] = set()
        for key, value in pairs[1:]:
            low = key.lower()
            if low != "nodes":
                error(number, key, f"unknown key in block {name!r} (expected Nodes=)", name)
                continue
            if low in seen:
                error(number, key, f"given twice for block {name!r}", name)
                continue
            seen.add(low)
            try:
                nodes = host_list(value, MAX_RANGE)
            except ValueError as exc:
                error(number, key, f"block {name!r}: {exc}", name)
        if "nodes" not in seen:
            error(number, "BlockName", f"block {name!r} has no Nodes=", name)
        blocks.append(BlockDef(name, number, nodes))
    _validate(blocks, sizes, sizes_line, error)
    return tuple(blocks), sizes


def _block_sizes(value: str, number: int, error: ErrorFn) -> tuple[int, ...]:
    parts = [p.strip() for p in value.split(",")]
    if not value or not all(p.isdigit() and int(p) > 0 for p in parts):
        error(number, "BlockSizes", f"must be positive integers, got {value!r}")
        return ()
    sizes = tuple(int(p) for p in parts)
    if list(sizes) != sorted(set(sizes)):
        error(number, "BlockSizes", "must be strictly increasing")
        return ()
    if any(s % sizes[0] for s in sizes):
        error(number, "BlockSizes", "every size must be a multiple of the first (base) size")
        return ()
    return sizes


def _validate(blocks: list[BlockDef], sizes: tuple[int, ...], sizes_line: int | None, error: ErrorFn) -> None:
    by_name: dict[str, BlockDef] = {}
    owner: dict[str, BlockDef] = {}
    for blk in blocks:
        if blk.name in by_name:
            error(blk.line, "BlockName", f"duplicate block {blk.name!r} (first on line {by_name[blk.name].line})",
                  blk.name)
            continue
        by_name[blk.name] = blk
        for node in blk.nodes:
            first = owner.get(node)
            if first is not None:
                error(blk.line, "Nodes", f"node {node!r} is in two blocks: {first.name!r} (line {first.line}) "
                                         f"and {blk.name!r}", blk.name)
            else:
                owner[node] = blk
    filled = [len(b.nodes) for b in blocks if b.nodes]
    if sizes and filled and sizes[0] > min(filled):
        error(sizes_line, "BlockSizes", f"base size {sizes[0]} is larger than the smallest block ({min(filled)} nodes)")

