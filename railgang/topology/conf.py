"""Parser and validator for Slurm ``topology.conf`` (topology/tree and topology/block grammars).

Pure: text in, a frozen ``TopologyConf`` out, or a ``TopologyError`` carrying *every* problem found
with its file, line and switch, so ``railgang topology check`` can list them all at once. The CLI
turns the first problem into ``railgang.errors.InputError``; this module imports nothing
from the daemon.

A file is refused exactly when Slurm 22.05's slurmctld refuses it (a differential test against
the real slurmctld keeps it so; docs/topology.md "Conformance" lists the rules). What slurmctld
only logs (a node under two leaves, a switch with two parents, a key given twice, no switches at
all) is a *warning*: ``TopologyConf.warnings``, printed by ``check`` without failing it. The
lexical rules (comments, continuations, escapes, ``key = value``, host lists) live in
``slurm_syntax``. Block lines (``BlockName=``, ``BlockSizes=``) are topology/block, Slurm 23.11+:
read when a file has no ``SwitchName=`` line, an error inside a tree file (22.05 refuses them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from railgang.topology import hostnames
from railgang.topology.conf_block import BlockDef, parse_blocks
from railgang.topology.slurm_syntax import host_list, logical_lines, next_pair, parse_uint32

__all__ = [
    "MAX_RANGE",
    "NO_NODES",
    "BlockDef",
    "Problem",
    "SwitchDef",
    "TopologyConf",
    "TopologyError",
    "check_topology",
    "expand_hosts",
    "parse_topology",
]

# Names one host list may expand to (the one expander's limit). Slurm caps each range at 65,536
# names but not their number; a typo such as a[1-9999]b[1-9999] must not allocate 100 million.
MAX_RANGE = hostnames.MAX_HOSTS
# slurmctld resolves switch levels in at most 21 passes over the file (topology_tree.c) and then
# gives up with "Switch configuration is not a tree", even for a deep tree listed top-down.
_MAX_PASSES = 21
# A file naming no nodes parses, but nothing could be placed on it: the fabric builders and
# `railgang topology check` refuse it with this line.
NO_NODES = "no nodes: the file names no Nodes= (empty, or comments only); nothing could be placed on it"
_TREE_KEYS = {"nodes", "switches", "linkspeed"}
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the file, located for a ``file:line: field: message`` report."""

    path: str
    line: int | None
    field: str | None
    message: str
    switch: str | None = None  # the switch (or block) the problem is about, if any
    severity: str = "error"  # "error": slurmctld refuses the file; "warning": it only logs it

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
class TopologyConf:
    """A valid topology: ``kind`` is "tree" or "block" (an empty file is an empty tree)."""

    path: str
    kind: str
    switches: tuple[SwitchDef, ...] = ()
    blocks: tuple[BlockDef, ...] = ()
    block_sizes: tuple[int, ...] = ()
    warnings: tuple[Problem, ...] = field(default=(), compare=False)

    @property
    def roots(self) -> tuple[str, ...]:
        """Switches no other switch lists (a well-formed tree has exactly one)."""
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


def expand_hosts(expr: str) -> tuple[str, ...]:
    """Expand a host list of railgang's own files (``gpu[001-064,070]``) strictly: ``n[`` or an
    empty list is an error here, although slurmctld reads ``n[`` in topology.conf as the host
    ``n]`` (topology.conf goes through ``slurm_syntax.slurm_hostlist`` instead)."""
    expr = expr.strip()
    if not expr:
        raise ValueError("empty host list")
    try:
        names = hostnames.expand(expr, MAX_RANGE)
    except hostnames.HostListError as exc:
        raise ValueError(str(exc)) from None
    if not names or any(not n or not _NAME.match(n) for n in names):
        raise ValueError(f"malformed host list {expr!r}")
    return tuple(names)


def _slurm_hosts(expr: str) -> tuple[str, ...]:
    return host_list(expr, MAX_RANGE)


def parse_topology(text: str, path: str = "<string>") -> TopologyConf:
    """Parse and validate; raise ``TopologyError`` listing every error found."""
    problems: list[Problem] = []
    conf = _parse(text, path, problems)
    errors = _in_file_order([p for p in problems if p.severity == "error"])
    if errors:
        raise TopologyError(errors)
    warnings = _in_file_order([p for p in problems if p.severity != "error"])
    return TopologyConf(conf.path, conf.kind, conf.switches, conf.blocks, conf.block_sizes, warnings)


def check_topology(text: str, path: str = "<string>", *, warnings: bool = False) -> tuple[Problem, ...]:
    """Every error in ``text`` (empty when slurmctld would accept it), and with ``warnings`` also
    what slurmctld only logs (``Problem.severity`` tells them apart)."""
    problems: list[Problem] = []
    _parse(text, path, problems)
    return _in_file_order([p for p in problems if warnings or p.severity == "error"])


def _in_file_order(problems: list[Problem]) -> tuple[Problem, ...]:
    return tuple(sorted(problems, key=lambda p: p.line or 0))


class _Report:
    """Problems of one file, with its path filled in."""

    def __init__(self, path: str, out: list[Problem]) -> None:
        self.path, self.out = path, out

    def error(self, line: int | None, fld: str | None, message: str, switch: str | None = None) -> None:
        self.out.append(Problem(self.path, line, fld, message, switch))

    def warn(self, line: int | None, fld: str | None, message: str, switch: str | None = None) -> None:
        self.out.append(Problem(self.path, line, fld, message, switch, "warning"))


@dataclass
class _Switch:
    name: str
    line: int
    nodes: str | None = None  # the raw host lists: Nodes="" is a leaf with no nodes
    switches: str | None = None
    link_speed: int | None = None


def _parse(text: str, path: str, problems: list[Problem]) -> TopologyConf:
    report = _Report(path, problems)
    lines = list(logical_lines(text))
    heads = {kv.key.lower() for _, body in lines if (kv := next_pair(body)) is not None}
    tree = "switchname" in heads
    mixed = tree and bool(heads & {"blockname", "blocksizes"})
    switches: list[_Switch] = []
    block_lines: list[tuple[int, str]] = []
    for number, body in lines:
        if body[:7].lower() == "include" and body[7:8].isspace():
            report.error(number, "Include", "Include is not followed by railgang: put the file's lines here")
            continue
        kv = next_pair(body)
        if kv is None:
            if body.strip():
                report.error(number, None, f"expected key=value, got {body.strip()[:80]!r}")
            continue
        head = kv.key.lower()
        if head == "switchname" and mixed:
            # refused under either plugin: topology/block names the SwitchName= key, tree BlockName=
            report.error(number, kv.key, "SwitchName= is topology/tree; this file also has "
                                         "BlockName=/BlockSizes= lines (topology/block)")
            switches.append(_switch_line(kv.value, kv.rest, number, report))
        elif head == "switchname":
            switches.append(_switch_line(kv.value, kv.rest, number, report))
        elif head in ("blockname", "blocksizes") and not tree:
            block_lines.append((number, body))
        elif head in ("blockname", "blocksizes"):
            report.error(number, kv.key, f"{kv.key}= is topology/block (Slurm 23.11+); this file is "
                                         "topology/tree, whose lines all start with SwitchName=")
        else:
            report.error(number, kv.key, "unknown key: a line must start with SwitchName= "
                                         "(topology/tree) or BlockName=/BlockSizes= (topology/block)")
    if block_lines:
        blocks, sizes = parse_blocks(block_lines, report)
        return TopologyConf(path, "block", blocks=blocks, block_sizes=sizes)
    return TopologyConf(path, "tree", switches=_validate_tree(switches, report))


def _switch_line(name: str, rest: str, number: int, report: _Report) -> _Switch:
    """The keys after ``SwitchName=``, read the way topology_tree.c _parse_switches reads them:
    the first unknown key or bad value ends the line."""
    sw = _Switch(name, number)
    seen: set[str] = set()
    failed = False
    while (kv := next_pair(rest)) is not None:
        low = kv.key.lower()
        if low not in _TREE_KEYS:
            report.error(number, kv.key, f"unknown key in switch {name!r} "
                                         "(expected Switches=, Nodes=, LinkSpeed=)", name)
            failed = True
            break
        if low in seen:
            report.warn(number, kv.key, f"given twice for switch {name!r}; slurmctld uses the last value", name)
        seen.add(low)
        if low == "linkspeed":
            try:
                sw.link_speed = parse_uint32(kv.value, "LinkSpeed")
            except ValueError as exc:
                report.error(number, kv.key, f"switch {name!r}: {exc}", name)
                failed = True
                break
        elif low == "nodes":
            sw.nodes = kv.value
        else:
            sw.switches = kv.value
        rest = kv.rest
    else:
        if rest.strip():
            report.error(number, None, f"switch {name!r}: expected key=value, got {rest.strip()[:80]!r}", name)
            failed = True
    if sw.nodes is not None and sw.switches is not None:
        report.error(number, "Switches", f"switch {name!r} has both Nodes= and Switches=", name)
    elif sw.nodes is None and sw.switches is None and not failed:
        report.error(number, "SwitchName", f"switch {name!r} has neither Nodes= nor Switches=", name)
    return sw


def _hosts(sw: _Switch, value: str, fld: str, report: _Report) -> tuple[str, ...] | None:
    try:
        return _slurm_hosts(value)
    except ValueError as exc:
        report.error(sw.line, fld, f"switch {sw.name!r}: {exc}", sw.name)
        return None


def _validate_tree(switches: list[_Switch], report: _Report) -> tuple[SwitchDef, ...]:
    """The checks of topology_tree.c _validate_switches, all of them at once."""
    if not switches:
        report.warn(None, None, "no switches: slurmctld logs 'No switches configured' and runs "
                                "without a topology")
        return ()
    index: dict[str, _Switch] = {}
    for sw in switches:
        first = index.get(sw.name)
        if first is not None:
            report.error(sw.line, "SwitchName", f"duplicate switch {sw.name!r} (first on line {first.line})", sw.name)
        else:
            index[sw.name] = sw
    unique = list(index.values())
    nodes: dict[str, tuple[str, ...]] = {}
    kids: dict[str, tuple[str, ...]] = {}
    leaf_of: dict[str, _Switch] = {}
    for sw in unique:
        if sw.nodes is not None:
            got = _hosts(sw, sw.nodes, "Nodes", report)
            nodes[sw.name] = got or ()
            twice = [n for n in dict.fromkeys(got or ()) if n in leaf_of and leaf_of[n] is not sw]
            if twice:
                other = leaf_of[twice[0]]
                report.warn(sw.line, "Nodes", f"node {twice[0]!r} is under two leaves: {other.name!r} "
                                              f"(line {other.line}) and {sw.name!r}"
                            + (f" (and {len(twice) - 1} more nodes)" if len(twice) > 1 else ""), sw.name)
            for n in got or ():
                leaf_of.setdefault(n, sw)
        elif sw.switches is not None:
            got = _hosts(sw, sw.switches, "Switches", report)
            kids[sw.name] = got or ()
            if got == ():
                report.error(sw.line, "Switches", f"switch {sw.name!r}: Switches= names no switch "
                                                  "(slurmctld 22.05 crashes or finds no tree)", sw.name)
            for kid in dict.fromkeys(got or ()):
                if kid == sw.name:
                    report.error(sw.line, "Switches", f"switch {sw.name!r} lists itself", sw.name)
                elif kid not in index:
                    report.error(sw.line, "Switches", f"unknown switch {kid!r} (listed by switch {sw.name!r})", sw.name)
    if not any(p.severity == "error" and p.field == "Switches" for p in report.out):
        _check_levels(unique, kids, report)
    _warn_shape(unique, kids, leaf_of, report)
    return tuple(SwitchDef(sw.name, sw.line, nodes.get(sw.name, ()), kids.get(sw.name, ()),
                           sw.link_speed) for sw in unique)


def _check_levels(unique: list[_Switch], kids: dict[str, tuple[str, ...]], report: _Report) -> None:
    """slurmctld's level passes: each pass, in file order, sets a switch's level once all its
    children have one (children checked last to first); unresolved after 21 passes = refused."""
    level = {sw.name: (0 if sw.nodes is not None else -1) for sw in unique}
    for _ in range(_MAX_PASSES):
        resolved = True
        for sw in unique:
            if level[sw.name] != -1:
                continue
            best = -1
            for kid in reversed(kids.get(sw.name, ())):
                if level[kid] == -1:
                    resolved, best = False, -1
                    break
                best = max(best, level[kid] + 1)
            level[sw.name] = best
        if resolved:
            return
    stuck = [sw for sw in unique if level[sw.name] == -1]
    cycle = _cycle(kids)
    if cycle:
        at = next(sw for sw in unique if sw.name == cycle[0])
        report.error(at.line, "Switches", "not a tree: cycle " + " -> ".join([*cycle, cycle[0]]), at.name)
    else:
        at = stuck[0]
        report.error(at.line, "Switches", f"not a tree for slurmctld: switch {at.name!r} is still without a "
                                          f"level after {_MAX_PASSES} passes (list leaves and lower switches "
                                          "before the switches above them)", at.name)


def _cycle(kids: dict[str, tuple[str, ...]]) -> list[str]:
    """One cycle of the child graph (switch names in order), or [] if there is none."""
    state: dict[str, int] = {}
    for start in kids:
        stack = [(start, iter(kids.get(start, ())))]
        path = [start]
        state[start] = state.get(start, 0) or 1
        while stack:
            node, it = stack[-1]
            kid = next(it, None)
            if kid is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(kid) == 1:
                return path[path.index(kid):]
            elif not state.get(kid):
                state[kid] = 1
                stack.append((kid, iter(kids.get(kid, ()))))
                path.append(kid)
    return []


def _warn_shape(unique: list[_Switch], kids: dict[str, tuple[str, ...]], leaf_of: dict[str, _Switch],
                report: _Report) -> None:
    """What slurmctld accepts but a placement engine should hear about."""
    parent: dict[str, _Switch] = {}
    for sw in unique:
        for kid in dict.fromkeys(kids.get(sw.name, ())):
            other = parent.get(kid)
            if other is not None:
                report.warn(sw.line, "Switches", f"switch {kid!r} has two parents: {other.name!r} "
                                                 f"(line {other.line}) and {sw.name!r}", sw.name)
            parent[kid] = sw
    names = {sw.name for sw in unique}
    for node, sw in leaf_of.items():
        if node in names:
            report.warn(sw.line, "Nodes", f"node {node!r} of switch {sw.name!r} has a switch's name", sw.name)
    roots = [sw for sw in unique if sw.name not in parent]
    if len(roots) > 1:
        listed = ", ".join(f"{r.name} (line {r.line})" for r in roots[:5])
        more = f" and {len(roots) - 5} more" if len(roots) > 5 else ""
        report.warn(roots[1].line, "SwitchName", f"several roots: {listed}{more}; no switch reaches "
                                                 "every node (add a top switch listing them)", roots[1].name)
