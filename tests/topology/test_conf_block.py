"""topology/block rules as Slurm 24.11 reads them (railgang/topology/conf_block.py); the
differential test against the real slurmctld is tests/topology/conformance/test_block_conformance.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.topology.conf import TopologyError, parse_topology
from railgang.topology.conf_block import block_sizes_2411
from railgang.topology.slurm_syntax import slurm_hostlist


@pytest.mark.parametrize(("value", "sizes"), [
    ("18,36,72", (18, 36, 72)),
    ("4,4", (4,)),
    ("8x,16", (8, 16)),  # atoi
    (",4", (4,)),  # strtok skips empty pieces
    ("16,,32", (16, 32)),
    (" 16", (16,)),
    ("4,131072", (4, 131072)),  # 2^15 base blocks: the last level
    ("8,64,16", (8, 16, 64)),  # any order
], ids=str)
def test_block_sizes_slurmctld_accepts(value: str, sizes: tuple[int, ...]) -> None:
    assert block_sizes_2411(value) == sizes


@pytest.mark.parametrize(("value", "why"), [
    ("16,48", "power of two"), ("32,16", "power of two"), ("0x10", "positive"), ("", "no size"),
    ("-4", "positive"), ("abc", "positive"), ("65536", "divides by zero"), ("65537", "power of two"),
    ("1,65536", "more than 2"), ("99999999999", "power of two"),
], ids=str)
def test_block_sizes_slurmctld_refuses(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        block_sizes_2411(value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_block_sizes_of_any_text_are_powers_of_two_of_a_base_or_a_clear_error(value: str) -> None:
    try:
        sizes = block_sizes_2411(value)
    except ValueError as exc:
        assert str(exc)
        return
    base = sizes[0]
    assert base > 0 and list(sizes) == sorted(set(sizes))
    assert all(s % base == 0 and (s // base) & (s // base - 1) == 0 for s in sizes)


def test_24_11_host_lists_refuse_an_open_bracket_and_read_a_suffix() -> None:
    assert slurm_hostlist("n[", 10) == ("n]",)  # 22.05
    with pytest.raises(ValueError, match="without"):
        slurm_hostlist("n[", 10, "24.11")
    assert slurm_hostlist("n[1-2]x", 10, "24.11") == ("n1x", "n2x")
    with pytest.raises(ValueError, match="after"):
        slurm_hostlist("n[1-2]x", 10)


def test_block_file_rules() -> None:
    ok = parse_topology("BlockName=b1 Nodes=n[01-04]\nBlockName=b2 Nodes=n[01-04]\n")
    assert [p.message for p in ok.warnings] == [
        "node 'n01' is in two blocks: 'b1' (line 1) and 'b2'; placement uses the first"]
    twice = parse_topology("BlockName=b1 Nodes=n[01-04] Nodes=n[05-08]\nBlockSizes=2\nBlockSizes=4\n")
    assert twice.blocks[0].nodes == ("n05", "n06", "n07", "n08") and twice.block_sizes == (4,)
    assert len(twice.warnings) == 2
    for text, needle in [
        ("BlockName=b1 Nodes=n[01-08]\nBlockName=b2 Nodes=n[09-12]\n", "fewer than the base"),
        ("BlockName=b1 Nodes=n01\nBlockName=b1 Nodes=n02\n", "duplicate block"),
        ("BlockName=b1\n", "has no Nodes="),
        ('BlockName=b1 Nodes=""\n', "no block contains a node"),
        ("BlockName=b1 Color=1 Nodes=n01\n", "unknown key"),
        ("SwitchName=s1 Nodes=n01\nBlockName=b1 Nodes=n01\n", "also has BlockName"),
    ]:
        with pytest.raises(TopologyError, match=needle):
            parse_topology(text)


def test_a_node_in_two_blocks_belongs_to_the_first_in_the_fabric() -> None:
    from railgang.topology.fabric import fabric_from_conf

    conf = parse_topology("BlockName=b1 Nodes=n[01-04]\nBlockName=b2 Nodes=n[03-08]\n")
    fabric = fabric_from_conf(conf, blocks_are_nvlink=True)
    assert [fabric.leaf_of(n) for n in ("n03", "n04", "n05")] == ["b1", "b1", "b2"]
