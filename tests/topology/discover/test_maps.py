"""Node name maps (OpenSM and site forms) and rail maps: parsed, or refused with file and line."""

from __future__ import annotations

import pytest

from railgang.topology.discover.maps import parse_node_name_map, parse_rail_map
from railgang.topology.inputs import InputProblem

from .conftest import DATA


def test_opensm_and_site_forms() -> None:
    names = parse_node_name_map('# c\n0x0008f10400411a08 "SW1  (Rack  3)"\nH-003048c74e4a0000 x5570comp1  # n\n'
                                'S-8f10500200b50 "leaf-a"\n', "m")
    assert names == {"0008f10400411a08": "SW1  (Rack  3)", "003048c74e4a0000": "x5570comp1",
                     "0008f10500200b50": "leaf-a"}
    assert len(parse_node_name_map((DATA / "x5.map").read_text(), "x5.map")) == 86


@pytest.mark.parametrize(("text", "line", "needle"), [
    ('0x12 "a"\nnot a guid\n', 2, "expected `<guid>"),
    ('0x12 "unterminated\n', 1, "expected `<guid>"),
    ("# only comments\n", None, "empty node name map"),
], ids=["prose", "quote", "empty"])
def test_bad_name_maps(text: str, line: int | None, needle: str) -> None:
    with pytest.raises(InputProblem) as info:
        parse_node_name_map(text, "m")
    assert needle in str(info.value) and info.value.line == line


def test_rail_maps() -> None:
    rails = parse_rail_map('{"*": {"mlx5_0": 0}, "gpu[001-002]": {"mlx5_0": 3}}', "r.json")
    assert rails["gpu002"]["mlx5_0"] == 3 and rails["*"]["mlx5_0"] == 0
    assert parse_rail_map('["gpu001"]\nmlx5_0 = 1\n', "r.toml")["gpu001"]["mlx5_0"] == 1
    assert parse_rail_map('"gpu[001-002]":\n  mlx5_0: 0\n  mlx5_3: 1\n', "r.yaml")["gpu002"]["mlx5_3"] == 1


@pytest.mark.parametrize(("text", "path", "needle"), [
    ("{", "r.json", "not valid JSON"),
    ("[x", "r.toml", "not valid TOML"),
    ("a: [1\n", "r.yml", "not valid YAML"),
    ("[]", "r.json", "expected a table"),
    ('{"gpu1": {}}', "r.json", "must map HCA names to rails"),
    ('{"gpu1": {"mlx5_0": -1}}', "r.json", "non-negative integer"),
    ('{"gpu1": {"mlx5_0": true}}', "r.json", "non-negative integer"),
    ('{"gpu[1-": {"mlx5_0": 0}}', "r.json", "host list"),
], ids=["json", "toml", "yaml", "not-a-table", "empty-entry", "negative", "bool", "bad-hosts"])
def test_bad_rail_maps(text: str, path: str, needle: str) -> None:
    with pytest.raises(InputProblem, match=needle):
        parse_rail_map(text, path)
