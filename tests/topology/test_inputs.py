"""Node-facts files, Slurm JSON node facts and free-GPU files; bounded reading; the topology
commands on bad input (one line, exit 1 for invalid input, 3 for valid but not placeable now)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.errors import InputError
from railgang.topology.conf import check_topology
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.inputs import (
    MAX_LINE_BYTES,
    InputProblem,
    cap_list,
    facts_from_slurm_json,
    iter_lines,
    parse_facts,
    parse_free,
    read_text,
)

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


# --- bounded reading (issue 11 part 7) --------------------------------------------------------

def test_read_text_refuses_endless_and_binary_input(tmp_path: Path) -> None:
    with pytest.raises(InputProblem, match="is a character device"):  # refused unread
        read_text("/dev/zero", "topology file")
    with pytest.raises(InputProblem, match="larger than 1 MiB"):
        (tmp_path / "big").write_bytes(b"x" * (2**20 + 1))
        read_text(tmp_path / "big", "file", limit=2**20)
    (tmp_path / "nul").write_bytes(b"SwitchName=a\0\n")
    with pytest.raises(InputProblem, match="NUL bytes"):
        read_text(tmp_path / "nul", "file")
    (tmp_path / "latin").write_bytes(b"SwitchName=caf\xe9\n")
    with pytest.raises(InputProblem, match="not UTF-8"):
        read_text(tmp_path / "latin", "file")
    with pytest.raises(InputProblem, match="cannot read file: file not found"):
        read_text(tmp_path / "missing", "file")


def test_iter_lines_bounds_lines_and_total(tmp_path: Path) -> None:
    (tmp_path / "ok").write_text("a\r\nb\n\nc")
    assert list(iter_lines(tmp_path / "ok", "f")) == [(1, "a"), (2, "b"), (3, ""), (4, "c")]
    (tmp_path / "long").write_bytes(b"y" * (MAX_LINE_BYTES + 10))
    with pytest.raises(InputProblem, match="line longer than 64 KiB") as info:
        list(iter_lines(tmp_path / "long", "f"))
    assert info.value.line == 1
    (tmp_path / "many").write_text("z\n" * 100)
    with pytest.raises(InputProblem, match="larger than") as info:
        list(iter_lines(tmp_path / "many", "f", max_bytes=2**20 // 10_000))
    assert info.value.line is not None and info.value.line < 100


def test_cap_list() -> None:
    assert cap_list(["a", "b"], 5) == ["a", "b"]
    assert cap_list((str(i) for i in range(12)), 10)[-1] == "… and 2 more"


# --- the topology commands on bad input, through the CLI: one line, exit 1 or 3 ------------------

runner = CliRunner()
TREE = Path(__file__).parent / "data" / "tree.conf"


def _invoke(*args: str) -> Result:
    return runner.invoke(app, list(args))


def _is_input_error(res: Result, needle: str) -> bool:
    return res.exit_code == 1 and isinstance(res.exception, InputError) and needle in str(res.exception) and (
        "\n" not in str(res.exception))


@pytest.mark.parametrize("text", ["", "# comments only\n\n"], ids=["empty", "comments"])
def test_topology_without_nodes_is_an_error_everywhere(tmp_path: Path, text: str) -> None:
    conf = tmp_path / "t.conf"
    conf.write_text(text)
    res = _invoke("topology", "check", str(conf))
    assert res.exit_code == 1 and "no nodes" in res.stderr and "ok" not in res.stdout
    assert _is_input_error(_invoke("topology", "show", str(conf)), "no nodes")
    assert _is_input_error(_invoke("place", "-t", str(conf), "--gpus", "8"), "no nodes")


def test_dev_zero_is_one_line_for_every_file_option(tmp_path: Path) -> None:
    res = _invoke("topology", "check", "/dev/zero")
    assert res.exit_code == 1 and res.stderr.strip() == ("/dev/zero: is a character device; the "
                                                        "topology file must be a regular file")
    device = "is a character device"
    assert _is_input_error(_invoke("topology", "show", "/dev/zero"), device)
    assert _is_input_error(_invoke("place", "-t", "/dev/zero", "--gpus", "8"), device)
    assert _is_input_error(_invoke("place", "-t", str(TREE), "--gpus", "8", "--free", "/dev/zero"),
                           "the free-GPU file must be a regular file")
    assert _is_input_error(_invoke("place", "-t", str(TREE), "--gpus", "8", "--facts", "/dev/zero"),
                           "the facts file must be a regular file")
    big = tmp_path / "big.conf"  # a regular file over the bound: refused after 16 MiB + 1 bytes
    big.write_bytes(b"# padding\n" * (17 * 2**20 // 10))
    assert _is_input_error(_invoke("topology", "show", str(big)), "larger than 16 MiB")


def test_fifty_megabytes_of_repeats_is_refused_at_once(tmp_path: Path) -> None:
    conf = tmp_path / "big.conf"
    line = "SwitchName=s1 Nodes=n[1-4]\n"
    conf.write_text(line * (50 * 2**20 // len(line)))
    res = _invoke("topology", "check", str(conf))
    assert res.exit_code == 1 and "larger than 16 MiB" in res.stderr and len(res.stderr.splitlines()) == 1


def test_problem_lists_are_capped(tmp_path: Path) -> None:
    conf = tmp_path / "bad.conf"
    conf.write_text("".join(f"SwitchName=s{i} Colour=red\n" for i in range(150)))
    total = len(check_topology(conf.read_text(), str(conf)))
    assert total > 120
    res = _invoke("topology", "check", str(conf))
    lines = [line for line in res.stderr.splitlines() if not line.startswith("warning:")]
    assert res.exit_code == 1 and len(lines) == 22
    assert lines[-2] == f"… and {total - 20} more" and lines[-1].endswith(f"{total} problem(s)")
    data = json.loads(_invoke("topology", "check", str(conf), "--json").stdout)
    assert data["problems_count"] == total and len(data["problems"]) == 100


@pytest.mark.parametrize(("args", "needle"), [
    (["--gpus", "0"], "--gpus: must be a positive number, got 0"),
    (["--gpus", "-8"], "--gpus: must be a positive number"),
    (["--gpus", "8", "--tp", "0"], "--tp: must be a positive number"),
    (["--gpus", "8", "--pp", "0"], "--pp: must be a positive number"),
    (["--gpus", "200"], "asks for 200 GPUs, more than the whole topology has (128 GPUs on 16 nodes)"),
    (["--gpus", "16", "--tp", "16"], "tp=16 is wider than the largest NVLink domain (8 GPUs)"),
    (["--gpus", "8", "--tp", "2", "--pp", "3"], "tp*pp*dp"),
], ids=["zero", "negative", "tp-zero", "pp-zero", "larger-than-cluster", "tp-wider-than-node", "shape"])
def test_requests_no_state_could_satisfy_are_invalid_not_not_now(args: list[str], needle: str) -> None:
    assert _is_input_error(_invoke("place", "-t", str(TREE), *args), needle)


def test_larger_than_free_but_not_than_cluster_is_not_now() -> None:
    res = _invoke("place", "-t", str(TREE), "--gpus", "128", "--occupancy", "0.5")
    assert res.exit_code == 3 and "insufficient_gpus" in res.stdout


def test_what_the_idle_cluster_cannot_hold_is_invalid_whatever_is_free() -> None:
    # 80 GB GPUs everywhere: asking for 100 GB is invalid even when nothing is free right now
    res = _invoke("place", "-t", str(TREE), "--gpus", "8", "--min-gpu-mem", "100", "--occupancy", "1.0")
    assert _is_input_error(res, "cannot be placed even on the idle cluster: gpu_memory")
    assert _invoke("place", "-t", str(TREE), "--gpus", "8", "--min-gpu-mem", "80", "--occupancy", "1.0").exit_code == 3


def test_a_tp_degree_that_strands_gpus_is_warned_with_the_count() -> None:
    res = _invoke("place", "-t", str(TREE), "--gpus", "24", "--tp", "3")
    assert res.exit_code == 0
    assert ("warning: --tp 3 strands 32 of 128 GPUs: every one of the 16 NVLink domains keeps 2 GPU(s)"
            in res.stderr)
    assert "strands" not in _invoke("place", "-t", str(TREE), "--gpus", "24", "--tp", "4").stderr
