"""The public surface of ``railgang.topology.discover`` and its modules is pinned (STYLE.md 14)."""

from __future__ import annotations

import importlib

import pytest

EXPECTED = {
    "railgang.topology.discover": {
        "FACTS_FORMAT", "Device", "Discovery", "FabricFacts", "GeneratedFabric", "Hca", "Link", "Problem",
        "RailMap", "Shape", "SlurmSwitch", "SwitchInfo", "classify", "facts_json", "generate_ibnetdiscover",
        "parse_ibnetdiscover", "parse_node_name_map", "parse_rail_map", "render_conf", "slurm_tree",
    },
    "railgang.topology.discover.ibnetdiscover": {
        "MAX_SKIPPED", "Device", "Discovery", "Link", "link_gbps", "normal_guid", "parse_ibnetdiscover",
    },
    "railgang.topology.discover.classify": {
        "FabricFacts", "Hca", "Problem", "SwitchInfo", "classify", "host_and_hca", "natural_key", "switch_name",
    },
    "railgang.topology.discover.emit": {
        "FACTS_FORMAT", "SlurmSwitch", "facts_json", "render_conf", "slurm_hostlist", "slurm_tree",
    },
    "railgang.topology.discover.maps": {"RailMap", "parse_node_name_map", "parse_rail_map"},
    "railgang.topology.discover.generate": {"GeneratedFabric", "Shape", "generate_ibnetdiscover"},
    "railgang.topology.inputs": {
        "MAX_LINE_BYTES", "MAX_TEXT_BYTES", "FactsTable", "InputProblem", "cap_list", "facts_from_slurm_json",
        "iter_lines", "parse_facts", "parse_free", "read_text", "write_atomic", "write_if_changed",
    },
}


@pytest.mark.parametrize("module", sorted(EXPECTED))
def test_exported_members(module: str) -> None:
    mod = importlib.import_module(module)
    assert set(mod.__all__) == EXPECTED[module]
    assert all(hasattr(mod, name) for name in mod.__all__)
