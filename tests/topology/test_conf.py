"""topology.conf parser: both grammars, every validation rule, and a fuzz that never crashes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railgang.topology.conf import (
    MAX_RANGE,
    TopologyError,
    check_topology,
    expand_hosts,
    parse_topology,
)

DATA = Path(__file__).parent / "data"


def test_tree_file_parses_with_ranges_comments_and_continuations() -> None:
    conf = parse_topology((DATA / "tree.conf").read_text(), "tree.conf")
    assert conf.kind == "tree"
    assert conf.roots == ("core",)
    assert [s.name for s in conf.switches] == ["leaf1", "leaf2", "leaf3", "leaf4", "spine1", "spine2", "core"]
    assert conf.switches[2].nodes == ("gpu009", "gpu010", "gpu011", "gpu016")
    assert conf.switches[4].switches == ("leaf1", "leaf2")
    assert conf.switches[4].line == 6  # a continued line reports where it starts
    assert conf.switches[0].link_speed == 400
    assert len(conf.nodes) == 16


def test_block_file_parses() -> None:
    conf = parse_topology((DATA / "block.conf").read_text(), "block.conf")
    assert conf.kind == "block"
    assert [b.name for b in conf.blocks] == ["b1", "b2", "b3", "b4"]
    assert conf.block_sizes == (4, 8, 16)


def test_keys_are_case_insensitive() -> None:
    conf = parse_topology("switchname=s1 nodes=n[1-2]\n")
    assert conf.switches[0].nodes == ("n1", "n2")


def test_empty_file_is_an_empty_tree() -> None:
    assert parse_topology("# nothing\n\n").switches == ()


DEEP = "".join(f"SwitchName=l{i} Switches=l{i + 1}\n" for i in range(24)) + "SwitchName=l24 Nodes=n1\n"

# Each of these makes the real slurmctld 22.05 refuse to start (see tests/topology/conformance).
BAD = [
    ("unknown-key", "SwitchName=s1 Nodes=n1 Color=red\n", 1, "unknown key"),
    ("unknown-line", "Frobnicate=1\n", 1, "must start with"),
    ("no-equals", "SwitchName=s1 Nodes\n", 1, "expected key=value"),
    ("unknown-switch", "SwitchName=l Nodes=n1\nSwitchName=top Switches=l,s9\n", 2, "unknown switch 's9'"),
    ("cycle", "SwitchName=a Switches=b\nSwitchName=b Switches=a\nSwitchName=r Nodes=n1\n", 1, "cycle"),
    ("self-loop", "SwitchName=l Nodes=n1\nSwitchName=a Switches=a,l\n", 2, "lists itself"),
    ("duplicate-switch", "SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", 2, "duplicate switch"),
    ("empty-value", "SwitchName=a Nodes=\n", 1, "expected key=value"),
    ("text-after-range", "SwitchName=a Nodes=n[1-3]x\n", 1, "malformed host list"),
    ("reversed-range", "SwitchName=a Nodes=n[5-1]\n", 1, "Invalid range"),
    ("range-over-65536", "SwitchName=a Nodes=n[0-65536]\n", 1, "Too many hosts"),
    ("over-railgang-cap", "SwitchName=a Nodes=a[1-400]b[1-400]\n", 1, f"more than {MAX_RANGE}"),
    ("bad-linkspeed", "SwitchName=a Nodes=n1 LinkSpeed=fast\n", 1, "not a valid number"),
    ("negative-linkspeed", "SwitchName=a Nodes=n1 LinkSpeed=-1\n", 1, "less than zero"),
    ("empty-switch", "SwitchName=a\n", 1, "neither Nodes= nor Switches="),
    ("nodes-and-switches", "SwitchName=a Nodes=n1 Switches=b\nSwitchName=b Nodes=n2\n", 1, "both"),
    ("empty-switches", "SwitchName=l Nodes=n1\nSwitchName=t Switches=\"\"\n", 2, "names no switch"),
    ("too-deep-top-down", DEEP, 1, "not a tree"),
    ("glued-continuation", "SwitchName=s1\\\nNodes=n1\n", 1, "neither"),
    ("include", "include other.conf\n", 1, "Include"),
    ("block-in-tree", "SwitchName=a Nodes=n1\nBlockName=b Nodes=n2\n", 2, "topology/block"),
    ("duplicate-block", "BlockName=b Nodes=n1\nBlockName=b Nodes=n2\n", 2, "duplicate block"),
    # 24.11 accepts a node in two blocks and BlockSizes twice (tests/topology/test_conf_block.py)
    ("block-sizes-order", "BlockName=b Nodes=n[1-4]\nBlockSizes=8,4\n", 2, "power of two"),
    ("block-sizes-int", "BlockName=b Nodes=n[1-4]\nBlockSizes=4,x\n", 2, "positive"),
    ("block-sizes-twice", "BlockName=b Nodes=n[1-4]\nBlockSizes=4\nBlockSizes=8\n", 1, "fewer than the base"),
    ("block-no-nodes", "BlockName=b\n", 1, "no Nodes="),
]


@pytest.mark.parametrize(("text", "line", "needle"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_invalid_files_name_line_and_problem(text: str, line: int, needle: str) -> None:
    problems = check_topology(text, "t.conf")
    assert problems, "expected a problem"
    assert any(p.line == line and needle in p.message for p in problems), [str(p) for p in problems]
    with pytest.raises(TopologyError) as info:
        parse_topology(text, "t.conf")
    assert str(info.value).startswith("t.conf:")


# slurmctld starts on these and only logs them; railgang warns.
WARN = [
    ("two-leaves", "SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n2\nSwitchName=t Switches=a,b\n", 2,
     "under two leaves", "b"),
    ("two-parents", "SwitchName=l Nodes=n1\nSwitchName=a Switches=l\nSwitchName=b Switches=l\n", 3,
     "two parents", "b"),
    ("several-roots", "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\n", 2, "several roots", "b"),
    ("duplicate-key", "SwitchName=a Nodes=n1 Nodes=n2\n", 1, "last value", "a"),
    ("node-is-switch", "SwitchName=a Nodes=b\nSwitchName=b Nodes=n1\nSwitchName=t Switches=a,b\n", 1,
     "switch's name", "a"),
    ("empty-file", "# nothing\n\n", None, "No switches configured", None),
]


@pytest.mark.parametrize(("text", "line", "needle", "switch"), [w[1:] for w in WARN], ids=[w[0] for w in WARN])
def test_what_slurmctld_only_logs_is_a_warning(text: str, line: int | None, needle: str, switch: str | None) -> None:
    assert check_topology(text, "t.conf") == ()
    conf = parse_topology(text, "t.conf")
    assert any(w.line == line and needle in w.message and w.switch == switch and w.severity == "warning"
               for w in conf.warnings), [str(w) for w in conf.warnings]


# slurmctld accepts these (each was checked on 22.05.8); railgang used to refuse some of them.
GOOD = [
    ("blanks-around-equals", "SwitchName = s1 Nodes = n[1-2]\n", ("n1", "n2")),
    ("quoted-list", 'SwitchName="s1" Nodes="n1 n2,n3"\n', ("n1", "n2", "n3")),
    ("operator", "SwitchName=s1 Nodes+=n1 LinkSpeed-=5\n", ("n1",)),
    ("unclosed-bracket", "SwitchName=s1 Nodes=n[\n", ("n]",)),
    ("open-range", "SwitchName=s1 Nodes=n[1-]\n", ("n1",)),
    ("two-ranges", "SwitchName=s1 Nodes=a[1-2]b[3-4]\n", ("a1b3", "a1b4", "a2b3", "a2b4")),
    ("escape", "SwitchName=s\\#1 Nodes=n\\1\n", ("n1",)),
    ("continuation", "SwitchName=s1 \\\n  Nodes=n1 # comment\n", ("n1",)),
    ("any-name", "SwitchName=s@1! Nodes=n1\n", ("n1",)),
    ("empty-leaf", 'SwitchName=s1 Nodes=""\n', ()),
    ("value-swallows-key", "SwitchName=s1 Nodes= LinkSpeed=5\n", ("LinkSpeed=5",)),
]


@pytest.mark.parametrize(("text", "nodes"), [g[1:] for g in GOOD], ids=[g[0] for g in GOOD])
def test_what_slurmctld_accepts_parses(text: str, nodes: tuple[str, ...]) -> None:
    assert check_topology(text, "t.conf") == ()
    assert parse_topology(text, "t.conf").switches[0].nodes == nodes


@pytest.mark.parametrize(("value", "expected"), [
    ("0", 0), ("0x10", 16), ("010", 8), ("1k", 1024), ("UNLIMITED", 0xFFFFFFFF), ("", 0), ("4294967295", 0xFFFFFFFF),
], ids=["zero", "hex", "octal", "kilo", "unlimited", "empty", "max"])
def test_link_speed_reads_like_slurm(value: str, expected: int) -> None:
    conf = parse_topology(f'SwitchName=s1 Nodes=n1 LinkSpeed="{value}"\n')
    assert conf.switches[0].link_speed == expected


def test_deep_tree_listed_bottom_up_is_fine() -> None:
    text = "".join(reversed(DEEP.splitlines(keepends=True)))
    assert check_topology(text) == ()


def test_every_problem_is_reported_at_once() -> None:
    problems = check_topology((DATA / "bad.conf").read_text(), "bad.conf", warnings=True)
    rendered = [str(p) for p in problems]
    assert any("bad.conf:2: Nodes: node 'gpu004' is under two leaves" in r for r in rendered)
    assert any("bad.conf:2: LinkSpeed: switch 'leaf2': LinkSpeed value (fast)" in r for r in rendered)
    assert any("bad.conf:3: Color: unknown key" in r for r in rendered)
    assert any("bad.conf:3: Switches: unknown switch 'leaf3'" in r for r in rendered)
    assert {p.switch for p in problems} == {"leaf2", "spine"}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [("n1", ("n1",)), ("gpu[01-03]", ("gpu01", "gpu02", "gpu03")), ("a[1,3],b2", ("a1", "a3", "b2"))],
    ids=["single", "padded-range", "mixed"],
)
def test_expand_hosts(expr: str, expected: tuple[str, ...]) -> None:
    assert expand_hosts(expr) == expected


_TOKENS = st.sampled_from([
    "SwitchName=", "Switches=", "Nodes=", "LinkSpeed=", "BlockName=", "BlockSizes=", "s1", "s2",
    "n[1-4]", "n[", "]", "[", "-", ",", "=", " ", "  ", "\t", "#", "\\", "\n", "\\\n", "400", "0",
    "n[1-3,5]", "x" * 3, "[9-1]", "é", "\x00", "n[00-99999999]",
])


@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.lists(_TOKENS, max_size=40).map("".join), st.text(max_size=200)))
def test_fuzz_parser_never_crashes(text: str) -> None:
    try:
        conf = parse_topology(text, "fuzz.conf")
    except TopologyError as exc:
        assert exc.problems
        assert all(p.path == "fuzz.conf" for p in exc.problems)
    else:
        assert conf.kind in ("tree", "block")
