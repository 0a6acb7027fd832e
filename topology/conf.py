"""Parser and validator for Slurm ``topology.conf`` (topology/tree and topology/block grammars).

Pure: text in, a frozen ``TopologyConf`` out, or a ``TopologyError`` carrying *every* problem found
with its file and line, so ``railgang topology check`` can list them all at once. The CLI turns the
first problem into ``railgang.daemon.errors.InputError``; this module imports nothing from the daemon.

Grammar (as slurmctld reads it): ``key=value`` pairs separated by blanks, keys case-insensitive,
``#`` starts a comment, a trailing backslash continues the line. Tree lines start with
``SwitchName=`` and may carry ``Switches=``, ``Nodes=`` and ``LinkSpeed=``; block lines start with
``BlockName=`` and carry ``Nodes=``; one ``BlockSizes=`` line lists the aggregation sizes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import hostlist

__all__ = [
    "MAX_RANGE",
    "BlockDef",
    "Problem",
    "SwitchDef",
    "TopologyConf",
    "TopologyError",
    "check_topology",
    "expand_hosts",
    "parse_topology",
]

# A typo such as n[1-9999999] must not make the parser allocate millions of names.
MAX_RANGE = 100_000

_TREE_KEYS = {"switchname", "switches", "nodes", "linkspeed"}
_BLOCK_KEYS = {"blockname", "nodes"}
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_BRACKET = re.compile(r"\[([^\]]*)\]")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the file, located for a ``file:line: field: message`` report."""

    path: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.path + (f":{self.line}" if self.line is not None else "")
        field = f"{self.field}: " if self.field else ""
        return f"{where}: {field}{self.message}"


class TopologyError(ValueError):
    """The topology file is invalid; ``problems`` lists every error found, in file order."""

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        self.problems = problems
        first = str(problems[0]) if problems else "invalid topology"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(first + more)


@dataclass(frozen=True)
class SwitchDef:
    """One ``SwitchName=`` line."""

    name: str
    line: int
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_speed: int | None = None


@dataclass(frozen=True)
class BlockDef:
    """One ``BlockName=`` line."""

    name: str
    line: int
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TopologyConf:
    """A valid topology: ``kind`` is "tree" or "block" (an empty file is an empty tree)."""

    path: str
    kind: str
    switches: tuple[SwitchDef, ...] = ()
    blocks: tuple[BlockDef, ...] = ()
    block_sizes: tuple[int, ...] = ()

    @property
    def roots(self) -> tuple[str, ...]:
        """Switches no other switch lists (a valid tree has exactly one)."""
        listed = {s for sw in self.switches for s in sw.switches}
        return tuple(sw.name for sw in self.switches if sw.name not in listed)

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node named, in file order."""
        seen: dict[str, None] = {}
        for sw in self.switches:
            seen.update(dict.fromkeys(sw.nodes))
        for block in self.blocks:
            seen.update(dict.fromkeys(block.nodes))
        return tuple(seen)


def _range_size(expr: str) -> int:
    """Upper bound of how many names ``expr`` expands to, computed without expanding it."""
    total = 0
    for part in _split_top_level(expr):
        size = 1
        for inner in _BRACKET.findall(part):
            count = 0
            for piece in inner.split(","):
                lo, _, hi = piece.partition("-")
                if lo.strip().isdigit() and hi.strip().isdigit():
                    count += max(0, int(hi) - int(lo) + 1)
                else:
                    count += 1
            size *= max(count, 1)
        total += size
    return total


def _split_top_level(expr: str) -> Iterator[str]:
    depth, start = 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            yield expr[start:i]
            start = i + 1
    yield expr[start:]


def expand_hosts(expr: str) -> tuple[str, ...]:
    """Expand a Slurm hostlist (``gpu[001-064,070]``); ValueError says what is wrong."""
    expr = expr.strip()
    if not expr:
        raise ValueError("empty host list")
    if _range_size(expr) > MAX_RANGE:
        raise ValueError(f"host list {expr!r} expands to more than {MAX_RANGE} names")
    try:
        names = hostlist.expand_hostlist(expr)
    except (hostlist.BadHostlist, ValueError, IndexError, OverflowError) as exc:
        raise ValueError(f"malformed host list {expr!r}: {exc}") from exc
    if not names or any(not n or not _NAME.match(n) for n in names):
        raise ValueError(f"malformed host list {expr!r}")
    for name in names:
        # python-hostlist accepts reversed ranges silently as empty in some versions
        if "[" in name or "]" in name:
            raise ValueError(f"malformed host list {expr!r}")
    return tuple(names)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first physical line number, text) with comments removed and continuations joined."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(pending).strip()
        pending = []
        if joined:
            yield start, joined
    if pending:
        joined = " ".join(pending).strip()
        if joined:
            yield start, joined


def _pairs(body: str, path: str, number: int, problems: list[Problem]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for token in body.split():
        key, eq, value = token.partition("=")
        if not eq or not key:
            problems.append(Problem(path, number, None, f"expected key=value, got {token!r}"))
            continue
        out.append((key, value))
    return out


def parse_topology(text: str, path: str = "<string>") -> TopologyConf:
    """Parse and validate; raise ``TopologyError`` listing every problem found."""
    problems: list[Problem] = []
    conf = _parse(text, path, problems)
    if problems:
        raise TopologyError(_in_file_order(problems))
    return conf


def check_topology(text: str, path: str = "<string>") -> tuple[Problem, ...]:
    """Every problem in ``text`` (empty when the file is valid)."""
    problems: list[Problem] = []
    _parse(text, path, problems)
    return _in_file_order(problems)


def _in_file_order(problems: list[Problem]) -> tuple[Problem, ...]:
    return tuple(sorted(problems, key=lambda p: p.line or 0))


def _parse(text: str, path: str, problems: list[Problem]) -> TopologyConf:
    switches: list[SwitchDef] = []
    blocks: list[BlockDef] = []
    block_sizes: tuple[int, ...] = ()
    block_sizes_line: int | None = None
    kind: str | None = None
    kind_line = 0
    for number, body in _logical_lines(text):
        pairs = _pairs(body, path, number, problems)
        if not pairs:
            continue
        head = pairs[0][0].lower()
        if head == "switchname":
            this = "tree"
        elif head in ("blockname", "blocksizes"):
            this = "block"
        else:
            problems.append(Problem(path, number, pairs[0][0],
                                    "unknown key: a line must start with SwitchName=, BlockName= or BlockSizes="))
            continue
        if kind is None:
            kind, kind_line = this, number
        elif kind != this:
            problems.append(Problem(path, number, pairs[0][0],
                                    f"mixes topology/{this} with topology/{kind} (first used on line {kind_line})"))
            continue
        if head == "blocksizes":
            if len(pairs) > 1:
                problems.append(Problem(path, number, pairs[1][0], "unknown key after BlockSizes="))
            if block_sizes_line is not None:
                problems.append(Problem(path, number, "BlockSizes", f"given twice (first on line {block_sizes_line})"))
                continue
            block_sizes_line = number
            block_sizes = _block_sizes(pairs[0][1], path, number, problems)
            continue
        if this == "tree":
            sw = _switch(pairs, path, number, problems)
            if sw is not None:
                switches.append(sw)
        else:
            blk = _block(pairs, path, number, problems)
            if blk is not None:
                blocks.append(blk)
    if kind == "block":
        _validate_blocks(blocks, block_sizes, block_sizes_line, path, problems)
        return TopologyConf(path, "block", blocks=tuple(blocks), block_sizes=block_sizes)
    _validate_tree(switches, path, problems)
    return TopologyConf(path, "tree", switches=tuple(switches))


def _hosts(value: str, field: str, path: str, number: int, problems: list[Problem]) -> tuple[str, ...]:
    try:
        return expand_hosts(value)
    except ValueError as exc:
        problems.append(Problem(path, number, field, str(exc)))
        return ()


def _switch(pairs: list[tuple[str, str]], path: str, number: int, problems: list[Problem]) -> SwitchDef | None:
    name = pairs[0][1]
    if not name or not _NAME.match(name):
        problems.append(Problem(path, number, "SwitchName", f"invalid switch name {name!r}"))
        return None
    nodes: tuple[str, ...] = ()
    kids: tuple[str, ...] = ()
    speed: int | None = None
    seen: set[str] = set()
    for key, value in pairs[1:]:
        low = key.lower()
        if low not in _TREE_KEYS or low == "switchname":
            problems.append(Problem(path, number, key, "unknown key (expected Switches=, Nodes=, LinkSpeed=)"))
            continue
        if low in seen:
            problems.append(Problem(path, number, key, "given twice on one line"))
            continue
        seen.add(low)
        if low == "nodes":
            nodes = _hosts(value, key, path, number, problems)
        elif low == "switches":
            kids = _hosts(value, key, path, number, problems)
        elif value.isdigit() and int(value) > 0:
            speed = int(value)
        else:
            problems.append(Problem(path, number, key, f"must be a positive integer, got {value!r}"))
    if not nodes and not kids and not ({"nodes", "switches"} & seen):
        problems.append(Problem(path, number, "SwitchName", f"switch {name!r} has neither Nodes= nor Switches="))
    return SwitchDef(name, number, nodes, kids, speed)


def _block(pairs: list[tuple[str, str]], path: str, number: int, problems: list[Problem]) -> BlockDef | None:
    name = pairs[0][1]
    if not name or not _NAME.match(name):
        problems.append(Problem(path, number, "BlockName", f"invalid block name {name!r}"))
        return None
    nodes: tuple[str, ...] = ()
    seen: set[str] = set()
    for key, value in pairs[1:]:
        low = key.lower()
        if low not in _BLOCK_KEYS or low == "blockname":
            problems.append(Problem(path, number, key, "unknown key (expected Nodes=)"))
            continue
        if low in seen:
            problems.append(Problem(path, number, key, "given twice on one line"))
            continue
        seen.add(low)
        nodes = _hosts(value, key, path, number, problems)
    if "nodes" not in seen:
        problems.append(Problem(path, number, "BlockName", f"block {name!r} has no Nodes="))
    return BlockDef(name, number, nodes)


def _block_sizes(value: str, path: str, number: int, problems: list[Problem]) -> tuple[int, ...]:
    parts = [p.strip() for p in value.split(",")]
    if not value or not all(p.isdigit() and int(p) > 0 for p in parts):
        problems.append(Problem(path, number, "BlockSizes", f"must be positive integers, got {value!r}"))
        return ()
    sizes = tuple(int(p) for p in parts)
    if list(sizes) != sorted(set(sizes)):
        problems.append(Problem(path, number, "BlockSizes", "must be strictly increasing"))
        return ()
    if any(s % sizes[0] for s in sizes):
        problems.append(Problem(path, number, "BlockSizes", "every size must be a multiple of the first (base) size"))
        return ()
    return sizes


def _validate_tree(switches: list[SwitchDef], path: str, problems: list[Problem]) -> None:
    by_name: dict[str, SwitchDef] = {}
    for sw in switches:
        if sw.name in by_name:
            problems.append(Problem(path, sw.line, "SwitchName",
                                    f"duplicate switch {sw.name!r} (first on line {by_name[sw.name].line})"))
        else:
            by_name[sw.name] = sw
    leaf_of: dict[str, SwitchDef] = {}
    parent_of: dict[str, SwitchDef] = {}
    for sw in by_name.values():
        for node in sw.nodes:
            if node in by_name:
                problems.append(Problem(path, sw.line, "Nodes", f"{node!r} is both a node and a switch"))
            first = leaf_of.get(node)
            if first is not None and first is not sw:
                problems.append(Problem(path, sw.line, "Nodes",
                                        f"node {node!r} is under two leaves: {first.name!r} (line {first.line}) and {sw.name!r}"))
            elif first is None:
                leaf_of[node] = sw
        for kid in sw.switches:
            if kid not in by_name:
                problems.append(Problem(path, sw.line, "Switches", f"unknown switch {kid!r}"))
                continue
            other = parent_of.get(kid)
            if other is not None and other is not sw:
                problems.append(Problem(path, sw.line, "Switches",
                                        f"switch {kid!r} has two parents: {other.name!r} (line {other.line}) and {sw.name!r}"))
            elif other is None:
                parent_of[kid] = sw
    for sw in by_name.values():
        if sw.name in sw.switches:
            problems.append(Problem(path, sw.line, "Switches", f"switch {sw.name!r} lists itself"))
    # Cycles: follow parents from every switch; a walk that returns to its start is a cycle.
    reported: set[str] = set()
    for start in by_name:
        walk, cur = [start], parent_of.get(start)
        while cur is not None and cur.name not in walk:
            walk.append(cur.name)
            cur = parent_of.get(cur.name)
        if cur is not None and cur.name == start and not (set(walk) & reported):
            reported.update(walk)
            cycle = " -> ".join([*reversed(walk), start])
            problems.append(Problem(path, by_name[start].line, "Switches", f"cycle: {cycle}"))
    roots = [sw for sw in by_name.values() if sw.name not in parent_of]
    if len(roots) > 1:
        names = ", ".join(f"{r.name} (line {r.line})" for r in roots[:5])
        extra = f" and {len(roots) - 5} more" if len(roots) > 5 else ""
        problems.append(Problem(path, roots[1].line, "SwitchName",
                                f"several roots: {names}{extra}; add a top switch listing them"))


def _validate_blocks(blocks: list[BlockDef], sizes: tuple[int, ...], sizes_line: int | None,
                     path: str, problems: list[Problem]) -> None:
    by_name: dict[str, BlockDef] = {}
    owner: dict[str, BlockDef] = {}
    for blk in blocks:
        if blk.name in by_name:
            problems.append(Problem(path, blk.line, "BlockName",
                                    f"duplicate block {blk.name!r} (first on line {by_name[blk.name].line})"))
            continue
        by_name[blk.name] = blk
        for node in blk.nodes:
            first = owner.get(node)
            if first is not None:
                problems.append(Problem(path, blk.line, "Nodes",
                                        f"node {node!r} is in two blocks: {first.name!r} (line {first.line}) and {blk.name!r}"))
            else:
                owner[node] = blk
    if sizes and blocks:
        smallest = min(len(b.nodes) for b in blocks if b.nodes) if any(b.nodes for b in blocks) else 0
        if smallest and sizes[0] > smallest:
            problems.append(Problem(path, sizes_line, "BlockSizes",
                                    f"base size {sizes[0]} is larger than the smallest block ({smallest} nodes)"))
