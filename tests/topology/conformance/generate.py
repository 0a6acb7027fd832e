"""Hypothesis strategies for ``topology.conf`` files, valid and malformed (topology/tree grammar).

A file is drawn as a fat tree (leaves, spines, an optional top), then zero to three mutations
from the list of things slurmctld reads specially (duplicates, unknown children, cycles, bad host
lists, bad LinkSpeed values, unknown keys, deep chains, ...), then rendered with the lexical
variety slurmctld allows (key case, blanks around ``=``, quotes, ``+=``, comments, continuations,
escapes, CRLF). Nodes come from n001-n080 while the oracle's slurm.conf defines n001-n064, so
some names are unknown to slurmctld (a warning there). ``Include`` lines are never drawn:
slurmctld waits 60 s for a missing include file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

__all__ = ["MUTATIONS", "any_files", "soup_files", "topology_files"]

BAD_HOSTS = ["n[5-1]", "n[", "n[1-", "n[1-3]x", "n[0-70000]", "n[]", "n[1x2]", "n[1a-3]", "n[1-]",
             "n[+1-3]", "a[1-2]b[3-4]", "a[1-2]b[3-1]", "n[001-004]]", "n[[1-2]", "n[1--2]", "n[-3]",
             "[1-2]", "n[1-2],,n3", "n[01-65536]", "n[a-b]", "n001]", "n[1,3-2]"]
SPEEDS = ["fast", "-1", "4294967296", "4294967295", "0x", "0x1F", "08", "010", "1kk", "1k", "0",
          "UNLIMITED", "infinite", "", "+5", "4194304k", "1.5", "99999999999999999999999"]
NAMES = ["s@1!", "x" * 300, "Spine", "a.b-c_d", "sw-01", "s[1]", "é"]
GARBAGE = ["hello world", "Frob=1", "BlockName=b1 Nodes=n001", "BlockSizes=4", "=x", "Nodes=n001",
           "SwitchName", "switchname =", "LinkSpeed=5 SwitchName=z Nodes=n001"]


@dataclass
class Sw:
    name: str
    nodes: str | None = None
    switches: str | None = None
    speed: str | None = None
    extra: list[tuple[str, str]] = field(default_factory=list)  # more key=value pairs, in order


def _hosts(draw: st.DrawFn, lo: int, hi: int) -> str:
    form = draw(st.sampled_from(["range", "list", "mixed", "single"]))
    if form == "single" or hi == lo:
        return f"n{lo:03d}"
    if form == "range":
        return f"n[{lo:03d}-{hi:03d}]"
    if form == "list":
        return ",".join(f"n{i:03d}" for i in range(lo, hi + 1))
    return f"n[{lo:03d}-{hi - 1:03d}],n{hi:03d}"


def _tree(draw: st.DrawFn) -> list[Sw]:
    leaves = draw(st.integers(1, 6))
    per = draw(st.integers(1, 10))
    out = [Sw(f"leaf{i + 1}", nodes=_hosts(draw, 1 + i * per, (i + 1) * per)) for i in range(leaves)]
    spines = draw(st.integers(0, min(3, leaves)))
    tops: list[str] = [s.name for s in out]
    if spines:
        groups: list[list[str]] = [[] for _ in range(spines)]
        for i, leaf in enumerate(tops):
            groups[i % spines].append(leaf)
        out += [Sw(f"spine{j + 1}", switches=",".join(g)) for j, g in enumerate(groups)]
        tops = [f"spine{j + 1}" for j in range(spines)]
    if len(tops) > 1 or draw(st.booleans()):
        compact = f"leaf[1-{leaves}]" if not spines else f"spine[1-{spines}]"
        out.append(Sw("top", switches=draw(st.sampled_from([",".join(tops), compact]))))
    for sw in out:
        if draw(st.integers(0, 3)) == 0:
            sw.speed = draw(st.sampled_from(["100", "400", "1k", "0x10"]))
    return out


def _mutate(draw: st.DrawFn, sws: list[Sw], what: str) -> list[Sw]:
    leaves = [s for s in sws if s.nodes is not None]
    inner = [s for s in sws if s.switches is not None]
    pick = draw(st.sampled_from(sws))
    if what == "duplicate":
        sws.insert(draw(st.integers(0, len(sws))), Sw(pick.name, nodes="n070"))
    elif what == "unknown-child" and inner:
        target = draw(st.sampled_from(inner))
        target.switches = f"{target.switches},nosuch{draw(st.integers(0, 9))}"
    elif what == "self-child" and inner:
        target = draw(st.sampled_from(inner))
        target.switches = f"{target.switches},{target.name}"
    elif what == "cycle" and inner:
        target = draw(st.sampled_from(inner))
        sws.append(Sw("loopa", switches=f"loopb,{target.name}"))
        sws.append(Sw("loopb", switches="loopa"))
    elif what == "both" and leaves:
        draw(st.sampled_from(leaves)).switches = sws[0].name
    elif what == "neither":
        pick.nodes = pick.switches = None
    elif what == "unknown-key":
        pick.extra.append((draw(st.sampled_from(["Color", "Link.Speed", "Node", "SwitchName", "Weight"])), "1"))
    elif what == "speed":
        pick.speed = draw(st.sampled_from(SPEEDS))
    elif what == "bad-hosts" and leaves:
        draw(st.sampled_from(leaves)).nodes = draw(st.sampled_from(BAD_HOSTS))
    elif what == "bad-children" and inner:
        draw(st.sampled_from(inner)).switches = draw(st.sampled_from(["leaf[2-1]", "leaf[", "leaf[1-2]x", '""', ",", "leaf[]"]))
    elif what == "multi-homed" and len(leaves) > 1:
        a, b = draw(st.sampled_from(leaves)), draw(st.sampled_from(leaves))
        b.nodes = f"{b.nodes},{a.nodes}"
    elif what == "two-parents" and inner:
        sws.append(Sw("extra", switches=draw(st.sampled_from([s.name for s in sws]))))
    elif what == "drop":
        sws.remove(pick)
    elif what == "node-is-switch" and leaves:
        target = draw(st.sampled_from(leaves))
        target.nodes = f"{target.nodes},{pick.name}"
    elif what == "duplicate-key":
        pick.extra.append(("Nodes" if pick.nodes is not None else "Switches", pick.nodes or pick.switches or "x"))
    elif what == "unknown-nodes" and leaves:
        draw(st.sampled_from(leaves)).nodes = draw(st.sampled_from(["x[1-4]", "n[065-080]", "gpu01", "n999"]))
    elif what == "empty-nodes" and leaves:
        draw(st.sampled_from(leaves)).nodes = '""'
    elif what == "rename":
        pick.name = draw(st.sampled_from(NAMES))
    elif what == "deep":
        depth = draw(st.integers(18, 26))
        chain = [Sw(f"d{i}", switches=f"d{i + 1}") for i in range(depth)] + [Sw(f"d{depth}", nodes="n075")]
        sws += chain if draw(st.booleans()) else list(reversed(chain))
    elif what == "shuffle":
        sws = draw(st.permutations(sws))
    return list(sws)


MUTATIONS = ["duplicate", "unknown-child", "self-child", "cycle", "both", "neither", "unknown-key",
             "speed", "bad-hosts", "bad-children", "multi-homed", "two-parents", "drop",
             "node-is-switch", "duplicate-key", "unknown-nodes", "empty-nodes", "rename", "deep",
             "shuffle", "garbage", "glued"]


def _key(draw: st.DrawFn, key: str) -> str:
    return draw(st.sampled_from([key, key, key, key.lower(), key.upper()]))


def _pair(draw: st.DrawFn, key: str, value: str) -> str:
    eq = draw(st.sampled_from(["=", "=", "=", "=", " = ", "+="]))
    if value and value[0] != '"' and " " not in value and draw(st.integers(0, 5)) == 0:
        value = f'"{value}"'
    return f"{_key(draw, key)}{eq}{value}"


def _render(draw: st.DrawFn, sws: list[Sw], garbage: bool, glued: bool) -> str:
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append("# generated by tests/topology/conformance/generate.py")
    for sw in sws:
        pairs = [_pair(draw, "SwitchName", sw.name)]
        body = [("Nodes", sw.nodes), ("Switches", sw.switches), ("LinkSpeed", sw.speed), *sw.extra]
        pairs += [_pair(draw, k, v) for k, v in draw(st.permutations(body)) if v is not None]
        sep = draw(st.sampled_from([" ", " ", "  ", "\t"]))
        text = pairs[0]
        for p in pairs[1:]:
            cont = draw(st.integers(0, 9))
            if cont == 0:
                text += " \\\n    " + p  # continued on the next line
            elif cont == 1 and glued:
                text += "\\\n" + p  # slurmctld joins these without a blank
            else:
                text += sep + p
        if draw(st.integers(0, 4)) == 0:
            text += draw(st.sampled_from(["  # trailing comment", "#x", " \\# not a comment"]))
        lines.append(draw(st.sampled_from(["", "", "", "  "])) + text)
        if draw(st.integers(0, 6)) == 0:
            lines.append(draw(st.sampled_from(["", "# comment", "   ", "#SwitchName=ghost Nodes=n001"])))
    if garbage:
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(GARBAGE)))
    end = draw(st.sampled_from(["\n", "\n", "\n", "\r\n"]))
    return end.join(lines) + (end if draw(st.integers(0, 5)) else "")


@st.composite
def topology_files(draw: st.DrawFn) -> str:
    """One topology.conf text (tree grammar), valid or not."""
    sws = _tree(draw)
    chosen = draw(st.lists(st.sampled_from(MUTATIONS), max_size=3))
    for what in chosen:
        if sws:
            sws = _mutate(draw, sws, what)
    return _render(draw, sws, "garbage" in chosen, "glued" in chosen)


_SOUP = ["SwitchName=", "switchname=", "Switches=", "Nodes=", "NODES=", "LinkSpeed=", "=", "+=", " = ", " ", " ",
         "\t", "\n", "\n", "\r\n", "\r", "\x0b", "\\", "\\\n", "#", "\\#", '"', "n001", "n[001-004]",
         "n[", "]", "leaf1", "leaf2", "s1", "s2", ",", "-", "0", "1k", "x", "Color=1", "SwitchName=leaf1 ",
         "SwitchName=leaf2 Nodes=n002\n", "SwitchName=top Switches=leaf[1-2]\n", "Nodes=n[001-002] "]


def soup_files() -> st.SearchStrategy[str]:
    """Token soup from the grammar's pieces: lexing corners (escapes, quotes, CR, continuations)."""
    return st.lists(st.sampled_from(_SOUP), min_size=1, max_size=30).map("".join)


def any_files() -> st.SearchStrategy[str]:
    """Mostly structured files, one in four token soup."""
    return st.one_of(topology_files(), topology_files(), topology_files(), soup_files())
