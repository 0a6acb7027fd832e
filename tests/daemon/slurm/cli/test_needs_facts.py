"""Node facts from typed GRES and features, needs in the railgang tag, and the fleet file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from railgang.daemon.core.model.needs import GpuFacts, parse_needs
from railgang.daemon.slurm.cli.facts import facts_from_slurm, render_fleet_file
from railgang.daemon.slurm.cli.parse import ParseProblem, RailgangTag, parse_tag
from railgang.daemon.slurm.cli.records import parse_sinfo
from railgang.daemon.slurm.cli.snapshot import core_node
from railgang.topology.inputs import write_if_changed


@pytest.mark.parametrize(("gres", "features", "facts"), [
    ("gpu:a100:8(S:0-1)", ["gpumem_80g", "nvlink", "ib"], GpuFacts("a100", 80.0, True, "ib", (8, 0))),
    ("gpu:a100:8", [], GpuFacts("a100", 40.0, False, "", (8, 0))),  # the smaller A100 unless told
    ("gpu:V100:8", ["gpumem_32", "eth"], GpuFacts("v100", 32.0, False, "eth", (7, 0))),
    ("gpu:h100:4,nvme:1", ["nvl_rack1", "roce"], GpuFacts("h100", 80.0, True, "roce", (9, 0))),
    ("gpu:8", ["gpumem_24g", "cc86"], GpuFacts("", 24.0, False, "", (8, 6))),
    ("gres:gpu:b200:8", ["sm_100"], GpuFacts("b200", 180.0, False, "", (10, 0))),
    ("gpu:mystery:8", ["rg_lame"], GpuFacts("mystery", 0.0, False, "", None)),
    ("", [], GpuFacts()),
], ids=repr)
def test_facts_from_typed_gres_and_features(gres: str, features: list[str], facts: GpuFacts) -> None:
    assert facts_from_slurm(gres, features) == facts


def test_sinfo_json_gives_the_core_node_its_facts() -> None:
    text = json.dumps({"meta": {"plugin": {"type": "openapi/v0.0.38"}}, "nodes": [
        {"name": "n01", "gres": "gpu:a100:8(S:0-1)", "state": "idle",
         "active_features": "gpumem_80g,nvlink,ib,rg_lame"},
        {"name": "n05", "gres": "gpu:v100:8", "state": "idle", "active_features": "gpumem_32g,eth"},
    ]})
    nodes, problems = parse_sinfo(text)
    assert problems == []
    big, old = (core_node(n) for n in nodes)
    assert big.gpus == 8 and big.tags == {"lame"} and big.facts == GpuFacts("a100", 80.0, True, "ib", (8, 0))
    assert parse_needs("gpumem>=40G,nvlink").met_by(big.facts)
    assert not parse_needs("gpumem>=40G").met_by(old.facts)


def test_needs_ride_in_the_tag_and_survive_a_preemption_mark() -> None:
    tag = parse_tag("railgang:tp=2,pp=1,dp=1;class=3;needs=nvlink,gpumem>=40G")
    assert tag is not None and tag.needs == parse_needs("gpumem>=40G,nvlink")
    assert tag.render() == "railgang:tp=2,pp=1,dp=1;class=3;needs=gpumem>=40G,nvlink"
    assert parse_tag(RailgangTag(needs=tag.needs, priority_class=1).render()) == RailgangTag(needs=tag.needs, priority_class=1)


@pytest.mark.parametrize("comment", ["railgang:class=3;needs=gpumem>40G", "railgang:class=3;needs=warp"])
def test_a_bad_needs_tag_is_a_parse_problem(comment: str) -> None:
    with pytest.raises(ParseProblem, match="AdminComment needs"):
        parse_tag(comment)


def test_fleet_file_has_one_sorted_line_per_kind_and_is_written_only_on_change(tmp_path: Path) -> None:
    a100 = GpuFacts("a100", 80.0, True, "ib", (8, 0))
    v100 = GpuFacts("v100", 32.0, False, "eth", (7, 0))
    nodes = [(f"n{i:02d}", 8, a100 if i <= 4 else v100) for i in range(8, 0, -1)] + [("x1", 4, GpuFacts())]
    text = render_fleet_file(nodes)
    assert text.splitlines()[1:] == [
        "n[01-04] nodes=4 gpus=8 type=a100 gpumem=80 nvlink=1 net=ib cc=8.0",
        "n[05-08] nodes=4 gpus=8 type=v100 gpumem=32 nvlink=0 net=eth cc=7.0",
        "x1 nodes=1 gpus=4 type=- gpumem=0 nvlink=0 net=- cc=-",
    ]
    path = tmp_path / "state" / "fleet.txt"
    assert write_if_changed(path, text) and path.read_text() == text
    assert not write_if_changed(path, text)  # unchanged: not touched
    assert oct(path.stat().st_mode & 0o777) == "0o644"
