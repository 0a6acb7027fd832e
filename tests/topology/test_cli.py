"""``railgang topology check|show`` and ``railgang place`` through the real ``railgang`` app."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.errors import InputError

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def test_check_valid_file() -> None:
    res = runner.invoke(app, ["topology", "check", str(DATA / "tree.conf")])
    assert res.exit_code == 0
    assert "ok (topology/tree, 7 switches, 16 nodes)" in res.stdout


def test_check_invalid_file_lists_every_problem_on_stderr() -> None:
    res = runner.invoke(app, ["topology", "check", str(DATA / "bad.conf")])
    assert res.exit_code == 1
    assert res.stdout == ""
    assert "bad.conf:2: Nodes: node 'gpu004' is under two leaves" in res.stderr
    assert "bad.conf:3: Switches: unknown switch 'leaf3'" in res.stderr
    assert "3 problem(s)" in res.stderr


def test_check_missing_file() -> None:
    res = runner.invoke(app, ["topology", "check", str(DATA / "nope.conf")])
    assert res.exit_code == 1 and "cannot read" in res.stderr


def test_show_text_and_json() -> None:
    res = runner.invoke(app, ["topology", "show", str(DATA / "tree.conf")])
    assert res.exit_code == 0
    assert "leaf3  (level 1, 4 nodes, 32 GPUs): gpu[009-011,016]" in res.stdout
    res = runner.invoke(app, ["topology", "show", str(DATA / "block.conf"), "--json", "--blocks-nvlink"])
    data = json.loads(res.stdout)
    assert data["kind"] == "block" and data["nodes"] == 16 and data["roots"] == ["blocks"]
    assert {s["name"]: s["level"] for s in data["switches"]}["b1"] == 1


def test_show_invalid_file_is_an_input_error() -> None:
    res = runner.invoke(app, ["topology", "show", str(DATA / "bad.conf")])
    assert res.exit_code == 1
    assert isinstance(res.exception, InputError)
    assert res.exception.path and res.exception.path.endswith("bad.conf") and res.exception.line == 2


def test_place_with_free_file_explain() -> None:
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--free", str(DATA / "free.txt"),
                              "--gpus", "32", "--tp", "8", "--pp", "2", "--explain"])
    assert res.exit_code == 0, res.output
    assert "placed 32 GPUs (3d) on 4 node(s)" in res.stdout and "gpu[001-004]" in res.stdout
    assert "cost terms:" in res.stdout and "rank  node" in res.stdout


def test_place_json_with_occupancy() -> None:
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--occupancy", "0.3",
                              "--seed", "4", "--gpus", "16", "--class", "dp", "--json"])
    assert res.exit_code in (0, 3)
    data = json.loads(res.stdout)
    if data["placed"]:
        assert sum(len(v) for v in data["gpus"].values()) == 16
        assert len(data["ranks"]) == 16 and data["allreduce_1gb_ms"] > 0


def test_place_unplaceable_exits_3_with_reason() -> None:
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--free", str(DATA / "free.txt"),
                              "--gpus", "40", "--tp", "8"])
    assert res.exit_code == 3
    assert "cannot place now: topology_fragmented" in res.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--occupancy", "1.5"], "--occupancy must be"),
        (["--occupancy", "0.5", "--free", "x"], "either --free or --occupancy"),
    ],
    ids=["bad-occupancy", "both-sources"],
)
def test_place_bad_options(args: list[str], needle: str) -> None:
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--gpus", "8", *args])
    assert res.exit_code == 1 and isinstance(res.exception, InputError)
    assert needle in str(res.exception)


def test_place_class_is_a_usage_error_listing_the_classes() -> None:
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--gpus", "8",
                              "--class", "huge"])
    assert res.exit_code == 2
    text = " ".join(res.output.replace("│", " ").split())  # the error box wraps long lines
    assert "'huge' is not one of '3d', 'dp', 'single'" in text


BAD_FREE = [
    ("bad-gpus", "gpu001 0-9\n", 1, "outside 0-7"),
    ("bad-shape", "gpu001\n", 1, "HOSTLIST GPUS"),
    ("bad-list", "gpu001 zero\n", 1, "is not 'all'"),
    ("bad-hosts", "gpu[001- all\n", 1, "malformed host list"),
    ("bad-json", "{\"gpu001\": 3}", None, "not 'all'"),
]


@pytest.mark.parametrize(("text", "line", "needle"), [b[1:] for b in BAD_FREE], ids=[b[0] for b in BAD_FREE])
def test_place_bad_free_file(tmp_path: Path, text: str, line: int | None, needle: str) -> None:
    f = tmp_path / "free.txt"
    f.write_text(text)
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--free", str(f), "--gpus", "8"])
    assert res.exit_code == 1 and isinstance(res.exception, InputError), res.output
    assert res.exception.line == line and needle in str(res.exception)


def test_place_unknown_nodes_warn_and_are_skipped(tmp_path: Path) -> None:
    f = tmp_path / "free.json"
    f.write_text(json.dumps({"gpu001": "all", "ghost[1-3]": "all"}))
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--free", str(f), "--gpus", "8"])
    assert res.exit_code == 0
    assert "3 node(s) not in the topology" in res.stderr


def test_place_with_facts_file(tmp_path: Path) -> None:
    facts = tmp_path / "facts.toml"
    facts.write_text('[defaults]\ngpus = 4\ngpu_mem_gb = 40\n[nodes."gpu[001-002]"]\ngpu_mem_gb = 80\n')
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--facts", str(facts),
                              "--gpus", "8", "--min-gpu-mem", "80", "--class", "dp", "--json"])
    assert res.exit_code == 0, res.output
    assert set(json.loads(res.stdout)["gpus"]) == {"gpu001", "gpu002"}
    facts.write_text("[defaults]\ngpus = 0\n")
    res = runner.invoke(app, ["place", "--topology", str(DATA / "tree.conf"), "--facts", str(facts), "--gpus", "8"])
    assert res.exit_code == 1 and isinstance(res.exception, InputError)


def _fake_snapshots(tmp_path: Path) -> tuple[Path, Path]:
    from railgang.topology.fabric import load_fabric
    from railgang.topology.fakefabric import FakeIBFabric

    fabric = load_fabric(DATA / "tree.conf")
    live = tmp_path / "live"
    fake = FakeIBFabric(live, fabric)
    fake.inject("gpu003", 5, symbol_error=4)
    before = tmp_path / "before"
    shutil.copytree(live, before)
    fake.step(10.0)
    after = tmp_path / "after"
    shutil.copytree(live, after)
    (after / "leaf2.perfquery").write_text("# Port counters: Lid 4 port 7\nLinkDownedCounter:....1\n")
    (before / "leaf2.perfquery").write_text("# Port counters: Lid 4 port 7\nLinkDownedCounter:....0\n")
    (after / "README").write_text("not counters")
    return before, after


def test_links_finds_lame_links_and_quarantines(tmp_path: Path) -> None:
    before, after = _fake_snapshots(tmp_path)
    res = runner.invoke(app, ["topology", "links", "--topology", str(DATA / "tree.conf"),
                              str(before), str(after), "--interval", "10"])
    assert res.exit_code == 0, res.output
    assert "gpu003 mlx5_5 port 1: lame" in res.stdout and "symbol_error 4/s" in res.stdout
    assert "leaf2 lid4 port 7: lame" in res.stdout
    assert "quarantine (5 node(s)):" in res.stdout  # gpu003 + the four nodes of leaf2
    assert "README" in res.stderr


def test_links_json(tmp_path: Path) -> None:
    before, after = _fake_snapshots(tmp_path)
    res = runner.invoke(app, ["topology", "links", "-t", str(DATA / "tree.conf"), str(before), str(after),
                              "--json", "--lame-errors-per-s", "5"])
    data = json.loads(res.stdout)
    assert [q["node"] for q in data["quarantine"]] == ["gpu005", "gpu006", "gpu007", "gpu008"]


def test_links_bad_inputs(tmp_path: Path) -> None:
    res = runner.invoke(app, ["topology", "links", "-t", str(DATA / "tree.conf"), str(tmp_path / "no"),
                              str(tmp_path), "--interval", "5"])
    assert res.exit_code == 1 and isinstance(res.exception, InputError)
    res = runner.invoke(app, ["topology", "links", "-t", str(DATA / "tree.conf"), str(tmp_path),
                              str(tmp_path), "--interval", "0"])
    assert res.exit_code == 1 and "--interval" in str(res.exception)


def test_generate_then_place_the_issue_example(tmp_path: Path) -> None:
    res = runner.invoke(app, ["topology", "generate", "--nodes", "1250", "--nodes-per-leaf", "32",
                              "--leaves-per-spine", "8", "--prefix", "gpu"])
    assert res.exit_code == 0
    conf = tmp_path / "topology.conf"
    conf.write_text(res.stdout)
    check = runner.invoke(app, ["topology", "check", str(conf)])
    assert check.exit_code == 0 and "1250 nodes" in check.stdout
    res = runner.invoke(app, ["place", "--topology", str(conf), "--occupancy", "0.5", "--seed", "1",
                              "--gpus", "256", "--tp", "8", "--pp", "4", "--dp", "8", "--class", "3d", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert len(data["ranks"]) == 256 and all(len(g) == 8 for g in data["gpus"].values())


def test_generate_rejects_bad_shapes() -> None:
    res = runner.invoke(app, ["topology", "generate", "--nodes", "0"])
    assert res.exit_code == 1 and isinstance(res.exception, InputError)
