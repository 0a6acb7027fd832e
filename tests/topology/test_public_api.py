"""The public surface of ``topology`` is pinned: other components code against these names."""

from __future__ import annotations

import importlib
import inspect

import pytest

EXPECTED = {
    "topology": {
        "Fabric", "GangRequest", "LinkHealth", "NodeFacts", "Placement", "RankSlot", "Unplaceable",
        "allreduce_time_s", "fabric_from_shape", "load_fabric", "place",
    },
    "railgang.topology.fabric": {
        "Fabric", "NodeFacts", "fabric_from_conf", "fabric_from_shape", "fabric_from_text", "load_fabric",
        "render_topology",
    },
    "railgang.topology.placement": {
        "CLASS_WEIGHTS", "GangRequest", "JobClass", "Placement", "PlacementFailure", "RankSlot",
        "ScoreWeights", "Unplaceable", "distance_weight", "place", "score_layout",
    },
    "railgang.topology.comm": {
        "DGX_A100", "DGX_H100", "DGX_H200", "SYSTEMS", "CollectiveTime", "CommParams", "allreduce_time",
        "concurrent_allreduce", "params_for", "step_times",
    },
    "railgang.topology.comm_model": {
        "CommParams", "DEFAULT_PARAMS", "allreduce_time_s", "ring_allreduce_time_s", "step_comm_time_s",
    },
    "railgang.topology.health": {"LinkHealth"},
    "railgang.topology.files": {
        "MAX_LINE_BYTES", "MAX_TEXT_BYTES", "InputProblem", "iter_lines", "open_input", "parse_json",
        "parse_toml", "read_bytes", "read_text",
    },
    "topology.conf": {
        "MAX_RANGE", "NO_NODES", "BlockDef", "Problem", "SwitchDef", "TopologyConf", "TopologyError",
        "check_topology", "expand_hosts", "parse_topology",
    },
    "railgang.topology.counters": {
        "ERROR_COUNTERS", "PortKey", "PortRates", "PortSample", "parse_node_exporter",
        "parse_perfquery", "port_rates", "read_sysfs",
    },
    "railgang.topology.linkstate": {
        "Assessment", "LinkState", "QuarantineEntry", "Thresholds", "assess", "classify",
        "quarantine_entries", "rail_from_device",
    },
    "railgang.topology.fakefabric": {"FakeIBFabric", "Injection"},
    "railgang.topology.linktrack": {"Change", "Hysteresis", "LinkTracker", "PortStatus"},
    "railgang.topology.occupancy": {"FreeMap", "all_free", "random_occupancy"},
}


@pytest.mark.parametrize("module", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_all_is_pinned(module: str) -> None:
    mod = importlib.import_module(module)
    assert set(mod.__all__) == EXPECTED[module]
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__doc__, f"{module}.{name} needs a docstring"
