"""Fabric: topology order, distances, NVLink domains, blocks, and the networkx graph."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

from railgang.topology.conf import TopologyError
from railgang.topology.fabric import (
    Fabric,
    NodeFacts,
    fabric_from_shape,
    load_fabric,
    render_topology,
)

DATA = Path(__file__).parent / "data"


def test_shape_names_and_levels() -> None:
    f = fabric_from_shape(16, 8, nodes_per_leaf=4, leaves_per_spine=2)
    assert f.nodes[0] == "n01" and f.nodes[-1] == "n16"
    assert f.leaves == ("s1", "s2", "s3", "s4")
    assert f.depth == 3 and f.roots == ("core",)
    assert f.total_gpus == 128
    assert f.height("core") == 3 and f.height("s1") == 1


@pytest.mark.parametrize(
    ("a", "b", "d"),
    [("n01", "n01", 0), ("n01", "n04", 1), ("n01", "n05", 2), ("n01", "n16", 3), ("n16", "n01", 3)],
    ids=["same-node", "same-leaf", "same-spine", "across-core", "symmetric"],
)
def test_distance(a: str, b: str, d: int) -> None:
    f = fabric_from_shape(16, 8, nodes_per_leaf=4, leaves_per_spine=2)
    assert f.distance(a, b) == d


def test_rail_change_costs_a_level_on_rail_optimised_fabrics() -> None:
    f = fabric_from_shape(8, 8, 4)
    assert f.gpu_distance(("n01", 3), ("n02", 3)) == 1
    assert f.gpu_distance(("n01", 3), ("n02", 4)) == 2
    assert f.gpu_distance(("n01", 3), ("n01", 4)) == 0
    flat = fabric_from_shape(8, 8, 4, rail_optimised=False)
    assert flat.gpu_distance(("n01", 3), ("n02", 4)) == 1


def test_path_switches() -> None:
    f = fabric_from_shape(16, 8, nodes_per_leaf=4, leaves_per_spine=2)
    assert f.path_switches("n01", "n02") == ("s1",)
    assert f.path_switches("n01", "n16") == ("s1", "spine1", "core", "spine2", "s4")


def test_load_tree_file_with_facts() -> None:
    facts = {"gpu001": NodeFacts("gpu001", gpus=4, gpu_type="a100", gpu_mem_gb=40.0)}
    f = load_fabric(DATA / "tree.conf", facts)
    assert len(f.nodes) == 16
    assert f.nodes.index("gpu016") == 11  # topology order: leaf3 holds gpu009-011 and gpu016
    assert f.facts("gpu001").gpus == 4 and f.facts("gpu002").gpus == 8
    assert f.leaf_of("gpu016") == "leaf3"
    assert f.distance("gpu001", "gpu016") == 3
    assert f.link_speed["leaf1"] == 400.0
    rails = 4 * 8  # four leaves, eight rail switches each (gpu001 has 4 GPUs, its leaf-mates 8)
    assert f.graph.number_of_nodes() == 16 + 7 + rails
    assert f.graph.nodes["gpu001"]["gpu_type"] == "a100"
    assert f.graph.degree("gpu001") == 4 and f.graph.degree("gpu002") == 8
    assert f.rail_switch("gpu002", 3) == "leaf1/rail3"
    assert f.graph.edges["gpu002", "leaf1/rail3"]["rail"] == 3


def test_graph_paths_follow_rails() -> None:
    f = fabric_from_shape(8, 8, nodes_per_leaf=4)
    assert nx.shortest_path_length(f.graph, "n01", "n02") == 2  # n01 - s1/rail0 - n02
    flat = fabric_from_shape(8, 8, nodes_per_leaf=4, rail_optimised=False)
    assert flat.graph.number_of_nodes() == 8 + 3
    assert nx.shortest_path(flat.graph, "n01", "n05") == ["n01", "s1", "core", "s2", "n05"]


def test_load_block_file_as_nvlink_domains() -> None:
    f = load_fabric(DATA / "block.conf", blocks_are_nvlink=True)
    assert f.leaves == ("b1", "b2", "b3", "b4")
    assert f.domain_of("nvl01") == "b1"
    assert f.distance("nvl01", "nvl04") == 0  # one NVLink domain
    assert f.distance("nvl01", "nvl05") == 2  # BlockSizes=4,8: b1+b2 aggregate
    assert f.distance("nvl01", "nvl09") == 3
    assert set(f.domains) == {"b1", "b2", "b3", "b4"}


def test_load_invalid_file_raises_with_location() -> None:
    with pytest.raises(TopologyError) as info:
        load_fabric(DATA / "bad.conf")
    assert "bad.conf:2" in str(info.value)


def test_direct_construction_rejects_cycles() -> None:
    with pytest.raises(ValueError, match="cycle"):
        Fabric({"a": ["b"], "b": ["a"]}, {"a": ["n1"]})


def test_empty_child_switch_is_allowed() -> None:
    f = Fabric({"top": ["l1", "spare"]}, {"l1": ["n1", "n2"]})
    assert f.height("spare") == 1 and f.height("top") == 2 and f.nodes == ("n1", "n2")


@pytest.mark.parametrize(("nodes", "per_leaf", "per_spine"), [(16, 4, None), (100, 8, 3), (1, 1, None)],
                         ids=["two-level", "three-level-partial", "tiny"])
def test_render_roundtrip(tmp_path: Path, nodes: int, per_leaf: int, per_spine: int | None) -> None:
    original = fabric_from_shape(nodes, 8, per_leaf, per_spine)
    path = tmp_path / "topology.conf"
    path.write_text(render_topology(original))
    loaded = load_fabric(path)
    assert loaded.nodes == original.nodes
    for a in original.nodes[:: max(1, nodes // 7)]:
        for b in original.nodes[:: max(1, nodes // 5)]:
            assert loaded.distance(a, b) == original.distance(a, b)
