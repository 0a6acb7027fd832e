"""Node-facts files, Slurm JSON node facts and free-GPU files."""

from __future__ import annotations

import json

import pytest

from railgang.topology.fabric import fabric_from_shape
from railgang.topology.inputs import InputProblem, facts_from_slurm_json, parse_facts, parse_free

F = fabric_from_shape(4, 8, nodes_per_leaf=2)


def test_facts_toml_defaults_and_ranges() -> None:
    table = parse_facts('[defaults]\ngpus = 4\ngpu_type = "a100"\n[nodes."n[01-02]"]\ngpu_mem_gb = 40\n'
                        'nvlink_domain = "r1"\n', "facts.toml")
    facts = table.for_nodes(["n01", "n03"])
    assert facts["n01"].gpus == 4 and facts["n01"].gpu_mem_gb == 40.0 and facts["n01"].nvlink_domain == "r1"
    assert facts["n03"].name == "n03" and facts["n03"].gpu_type == "a100" and facts["n03"].gpu_mem_gb == 80.0


BAD_FACTS = [
    ("toml-syntax", "[defaults\n", "facts.toml", "not valid TOML"),
    ("json-syntax", "{", "facts.json", "not valid JSON"),
    ("unknown-key", '{"defaults": {"colour": 1}}', "facts.json", "unknown key"),
    ("bad-type", '{"defaults": {"gpus": "eight"}}', "facts.json", "not a valid int"),
    ("zero-gpus", '{"defaults": {"gpus": 0}}', "facts.json", "not a valid int"),
    ("bad-range", '{"nodes": {"n[1-": {}}}', "facts.json", "malformed host list"),
    ("unknown-section", '{"racks": {}}', "facts.json", "unknown section"),
]


@pytest.mark.parametrize(("text", "path", "needle"), [b[1:] for b in BAD_FACTS], ids=[b[0] for b in BAD_FACTS])
def test_bad_facts(text: str, path: str, needle: str) -> None:
    with pytest.raises(InputProblem) as info:
        parse_facts(text, path)
    assert needle in str(info.value) and str(info.value).startswith(path)


def test_scontrol_json() -> None:
    text = json.dumps({"nodes": [
        {"name": "n01", "gres": "gpu:h100:8(S:0-1)", "features": ["nvl_rack1"]},
        {"name": "n02", "gres": "gpu:v100:4", "active_features": "gpumem_16,pcie"},
        {"name": "n03", "gres": ""},
    ]})
    facts = facts_from_slurm_json(text)
    assert facts["n01"].gpus == 8 and facts["n01"].gpu_type == "h100" and facts["n01"].nvlink_domain == "rack1"
    assert facts["n02"].gpu_mem_gb == 16.0 and not facts["n02"].nvlink and facts["n02"].gpus == 4
    assert facts["n03"].gpus == 8


def test_sinfo_json() -> None:
    text = json.dumps({"sinfo": [{"nodes": {"nodes": ["a1", "a2"]}, "gres": {"total": "gpu:a100:8"},
                                  "features": {"total": "gpumem_40"}}]})
    facts = facts_from_slurm_json(text)
    assert facts["a2"].gpu_mem_gb == 40.0 and facts["a2"].gpu_type == "a100"


@pytest.mark.parametrize("text", ["[]", "{", '{"other": 1}'], ids=["list", "broken", "unknown-shape"])
def test_bad_slurm_json(text: str) -> None:
    with pytest.raises(InputProblem):
        facts_from_slurm_json(text)


def test_free_text_and_json() -> None:
    free, warnings = parse_free("n[01-02] all\nn03 0-1,4 # comment\nn04 none\nghost 0\n", "free.txt", F)
    assert free == {"n01": frozenset(range(8)), "n02": frozenset(range(8)), "n03": frozenset({0, 1, 4}),
                    "n04": frozenset()}
    assert warnings and "ghost" in warnings[0]
    free, warnings = parse_free('{"n0[1-2]": [0, 7], "n03": "all"}', "free.json", F)
    assert free["n02"] == frozenset({0, 7}) and not warnings
