"""``choose``, the placement's subset search: the fewest items that cover the need, then the
least waste, ties to the lowest indices (Slurm's best fit over nodes and switches)."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st

from railgang.topology.fabric import Fabric, fabric_from_shape
from railgang.topology.placement.search import choose


@given(st.lists(st.integers(0, 16), max_size=8), st.integers(1, 64))
def test_choose_is_the_fewest_items_then_the_least_waste(caps: list[int], need: int) -> None:
    # up to 8 items the search budget covers every subset: the answer is exact
    got = choose(caps, need)
    subsets = [c for k in range(1, len(caps) + 1) for c in combinations(range(len(caps)), k)
               if sum(caps[i] for i in c) >= need]
    if not subsets:
        assert got is None
        return
    assert got is not None and got == sorted(set(got))
    best = min((len(c), sum(caps[i] for i in c) - need) for c in subsets)
    assert (len(got), sum(caps[i] for i in got) - need) == best


def test_ties_go_to_the_lowest_indices() -> None:
    assert choose([3, 3, 1, 1], 4) == [0, 2]
    assert choose([2, 2, 2], 2) == [0]
    assert choose([1, 4, 4, 1, 4], 8) == [1, 2]


def test_fabric_nodes_under_every_switch_in_topology_order() -> None:
    fabric = fabric_from_shape(16, 8, 4)  # 4 leaves of 4 nodes under one spine
    for switch in fabric.switches:
        assert fabric.nodes_under(switch) == tuple(
            n for n in fabric.nodes if switch == fabric.leaf_of(n) or switch in _above(fabric, n))
    assert [len(fabric.nodes_under(leaf)) for leaf in fabric.leaves] == [4, 4, 4, 4]
    assert fabric.nodes_under("no-such-switch") == ()


def _above(fabric: Fabric, node: str) -> set[str]:
    out: set[str] = set()
    s = fabric.parent(fabric.leaf_of(node))
    while s is not None:
        out.add(s)
        s = fabric.parent(s)
    return out
