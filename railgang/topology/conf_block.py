"""topology/block lines of ``topology.conf`` (Slurm 23.11+): ``BlockName=… Nodes=…`` and one
``BlockSizes=…``, read as the real Slurm 24.11 slurmctld reads them.

The rules come from src/plugins/topology/block/block_record.c (tag slurm-24-11-5-1) and are kept
true by a differential test against that slurmctld in a container
(tests/topology/conformance/test_block_conformance.py; docs/topology.md "Conformance"):

- ``_parse_block``: a block line holds only ``Nodes=``; an unknown key is a parse error; without
  ``Nodes=`` the block is refused ("hasn't got nodes"); ``Nodes=`` twice is only logged and the
  last value is used (parse_config.c), as is ``BlockSizes=`` twice.
- ``_read_topo_file``: ``BlockSizes`` is cut at commas (``strtok``: empty pieces vanish), each
  piece read by ``atoi`` (``8x`` is 8, ``0x10`` is 0); the first is the base block size (kept in a
  uint16: 65536 makes slurmctld divide by zero), every size must be the base times a power of two
  up to 2^15, in any order, repeats allowed; a size that is not, or that ``atoi`` reads as <= 0,
  is fatal.
- ``block_record_validate``: a name given twice is fatal; a bad host list is fatal (24.11's
  hostlist: ``n[`` is an error, ``n[1-2]x`` a suffix); without ``BlockSizes`` the first block
  with nodes sets the base size; a later block with fewer nodes than the base is fatal; a node in
  two blocks is accepted silently (railgang warns: placement takes the first block); no node in
  any block is fatal. Nodes slurm.conf lacks are dropped there before the size check; railgang
  does not read slurm.conf and counts every name.

The lexical rules are the same as for tree lines (``slurm_syntax``). ``BlockDef``, the record of
one block line, lives here with its parser; ``conf`` imports both (this module imports no ``conf``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from railgang.topology.hostnames import MAX_HOSTS as MAX_RANGE
from railgang.topology.slurm_syntax import host_list, next_pair

__all__ = ["BlockDef", "block_sizes_2411", "parse_blocks"]


@dataclass(frozen=True)
class BlockDef:
    """One ``BlockName=`` line."""

    name: str
    line: int
    nodes: tuple[str, ...] = ()

_MAX_LEVEL = 15  # block_record.c: "if (block_level > 15)"


class Report(Protocol):
    def error(self, line: int | None, fld: str | None, message: str, switch: str | None = None) -> None: ...

    def warn(self, line: int | None, fld: str | None, message: str, switch: str | None = None) -> None: ...


def parse_blocks(lines: list[tuple[int, str]], report: Report) -> tuple[tuple[BlockDef, ...], tuple[int, ...]]:
    """Blocks and block sizes of the logical ``lines`` (all start with BlockName= or BlockSizes=)."""
    raw: list[tuple[str, int, str | None]] = []  # (name, line, Nodes= value or None)
    sizes_at: tuple[int, str] | None = None
    for number, body in lines:
        kv = next_pair(body)
        assert kv is not None  # conf._parse sends only lines that start with a pair
        if kv.key.lower() == "blocksizes":
            rest = kv.rest.strip()
            if rest:
                report.error(number, "BlockSizes", f"unexpected text after BlockSizes=: {rest[:80]!r}")
            if sizes_at is not None:
                report.warn(number, "BlockSizes", f"given twice (first on line {sizes_at[0]}); "
                                                  "slurmctld uses the last value")
            sizes_at = (number, kv.value)
            continue
        raw.append((kv.value, number, _block_nodes(kv.value, kv.rest, number, report)))
    base = 0
    sizes: tuple[int, ...] = ()
    if sizes_at is not None:
        try:
            sizes = block_sizes_2411(sizes_at[1])
            base = sizes[0]
        except ValueError as exc:
            report.error(sizes_at[0], "BlockSizes", str(exc))
    return _validate(raw, base, report), sizes


def _block_nodes(name: str, rest: str, number: int, report: Report) -> str | None:
    """The ``Nodes=`` value of one block line (None: missing or the line failed)."""
    nodes: str | None = None
    while (kv := next_pair(rest)) is not None:
        if kv.key.lower() != "nodes":
            # s_p_parse_line stops at the first unknown key: what follows is not read
            report.error(number, kv.key, f"unknown key in block {name!r} (expected Nodes=)", name)
            return None
        if nodes is not None:
            report.warn(number, kv.key, f"given twice for block {name!r}; slurmctld uses the last value", name)
        nodes = kv.value
        rest = kv.rest
    if rest.strip():
        report.error(number, None, f"block {name!r}: expected key=value, got {rest.strip()[:80]!r}", name)
        return None
    if nodes is None:
        report.error(number, "Nodes", f"block {name!r} has no Nodes= (slurmctld: hasn't got nodes)", name)
    return nodes


def _atoi(text: str) -> int:
    """C ``atoi`` as glibc does it: ``(int) strtol(text, NULL, 10)`` on a 64-bit long."""
    s = text.lstrip(" \t\n\v\f\r")
    sign, digits = 1, ""
    if s[:1] in "+-" and s:
        sign, s = (-1 if s[0] == "-" else 1), s[1:]
    for ch in s:
        if not ch.isascii() or not ch.isdigit():
            break
        digits += ch
    value = sign * int(digits) if digits else 0
    value = max(-(2**63), min(2**63 - 1, value))  # strtol clamps to LONG_MIN/LONG_MAX
    value &= 0xFFFFFFFF  # then the cast to int keeps the low 32 bits
    return value - 2**32 if value >= 2**31 else value


def block_sizes_2411(value: str) -> tuple[int, ...]:
    """The block sizes (in nodes, ascending, unique) Slurm 24.11 reads from ``BlockSizes=value``;
    ValueError with slurmctld's reason when it refuses them (block_record.c ``_read_topo_file``)."""
    base = 0
    levels: set[int] = set()
    pieces = [p for p in value.split(",") if p]
    if not pieces:
        raise ValueError("names no size (slurmctld: Invalid BlockSizes value: (null))")
    for piece in pieces:
        size = _atoi(piece)
        if size <= 0:
            raise ValueError(f"{piece!r} is not a positive number (slurmctld: Invalid BlockSizes value)")
        if not base:
            base = size & 0xFFFF  # bblock_node_cnt is a uint16_t
            if not base:
                raise ValueError(f"base size {size} is 0 modulo 65536: slurmctld 24.11 divides by zero on it")
        level = size // base
        if size % base or level & (level - 1):
            raise ValueError(f"{piece!r} is not the base size {base} times a power of two "
                             "(slurmctld: Invalid BlockSizes value)")
        if level.bit_length() - 1 > _MAX_LEVEL:
            raise ValueError(f"{piece!r} is more than 2^{_MAX_LEVEL} base blocks (slurmctld: Invalid BlockSizes value)")
        levels.add(level.bit_length() - 1)
    return tuple(base << k for k in sorted(levels))


def _validate(raw: list[tuple[str, int, str | None]], base: int, report: Report) -> tuple[BlockDef, ...]:
    """block_record_validate's checks, in file order, all of them at once."""
    blocks: list[BlockDef] = []
    first_line: dict[str, int] = {}
    owner: dict[str, BlockDef] = {}
    for name, line, value in raw:
        if name in first_line:
            report.error(line, "BlockName", f"duplicate block {name!r} (first on line {first_line[name]})", name)
            continue
        first_line[name] = line
        if value is None:
            continue
        try:
            nodes = host_list(value, MAX_RANGE, "24.11")
        except ValueError as exc:
            report.error(line, "Nodes", f"block {name!r}: {exc}", name)
            continue
        count = len(set(nodes))
        if not base:
            base = count & 0xFFFF  # the first block with nodes sets the base size
        elif count < base:
            report.error(line, "Nodes", f"block {name!r} has {count} nodes, fewer than the base block size "
                                        f"{base} (slurmctld: children count lower than bblock_node_cnt)", name)
        blk = BlockDef(name, line, nodes)
        twice = [n for n in dict.fromkeys(nodes) if n in owner]
        if twice:
            other = owner[twice[0]]
            report.warn(line, "Nodes", f"node {twice[0]!r} is in two blocks: {other.name!r} (line {other.line}) "
                                       f"and {name!r}; placement uses the first", name)
        for n in nodes:
            owner.setdefault(n, blk)
        blocks.append(blk)
    if raw and not base:
        report.error(raw[0][1], "Nodes", "no block contains a node (slurmctld: Block not contains any nodes)")
    return tuple(blocks)
