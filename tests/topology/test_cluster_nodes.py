"""``railgang topology check`` against the cluster's node list (issue 35 item 5): a switch or block
naming a node the cluster does not define is refused, as slurmctld refuses the file ("Invalid node
name (...) in switch config (...)"); every hostile node list is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.errors import InputError
from railgang.topology.cluster_nodes import (
    nodes_from_scontrol,
    nodes_from_slurm_conf,
    unknown_nodes,
)
from railgang.topology.conf import parse_topology
from railgang.topology.files import InputProblem

runner = CliRunner()
RAILGANG = str(Path(sys.executable).with_name("railgang"))

TREE = "SwitchName=s1 Nodes=n[01-04]\nSwitchName=s2 Nodes=n[05-08],x1\nSwitchName=top Switches=s[1-2]\n"
BLOCKS = "BlockName=b1 Nodes=n[01-04]\nBlockName=b2 Nodes=n[05-08]\n"
SLURM_CONF = """ClusterName=c
NodeName=DEFAULT CPUs=4 RealMemory=1000
NodeName=n[01-06] Gres=gpu:8 Port=17001   # six GPU nodes
nodename = n07
PartitionName=gpu Nodes=ALL Default=YES
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "tree.conf").write_text(TREE)
    (tmp_path / "block.conf").write_text(BLOCKS)
    (tmp_path / "slurm.conf").write_text(SLURM_CONF)
    return tmp_path


def check(*args: str) -> tuple[int, str, str]:
    res = runner.invoke(app, ["topology", "check", *args])
    return res.exit_code, res.stdout, res.stderr


def test_slurm_conf_nodes_default_and_case() -> None:
    names, warnings = nodes_from_slurm_conf(SLURM_CONF + "Include nodes.conf\n", "slurm.conf")
    assert names == tuple(f"n{i:02d}" for i in range(1, 8))
    assert len(warnings) == 1 and "slurm.conf:6: Include nodes.conf is not read" in warnings[0]


def test_each_switch_naming_unknown_nodes_is_one_problem() -> None:
    conf = parse_topology(TREE, "t.conf")
    problems = unknown_nodes(conf, [f"n{i:02d}" for i in range(1, 7)])
    assert [(p.line, p.switch) for p in problems] == [(2, "s2")]
    assert "switch s2 names 3 node(s) the cluster does not have: n[07-08],x1" in str(problems[0])
    blocks = unknown_nodes(parse_topology(BLOCKS, "b.conf"), [f"n{i:02d}" for i in range(2, 9)])
    assert [(p.line, p.switch) for p in blocks] == [(1, "b1")] and "block b1" in blocks[0].message


def test_check_with_slurm_conf_refuses_unknown_nodes(files: Path) -> None:
    rc, out, err = check(str(files / "tree.conf"), "--slurm-conf", str(files / "slurm.conf"))
    assert rc == 1 and out == ""
    assert err.splitlines() == [
        f"{files / 'tree.conf'}:2: Nodes: switch s2 names 2 node(s) the cluster does not have: n08,x1 "
        "(slurmctld refuses the file: Invalid node name in switch config)",
        f"{files / 'tree.conf'}: 1 problem(s)"]
    rc, out, _ = check(str(files / "tree.conf"), "--nodes", "n[01-08],x1", "--json")
    assert rc == 0 and json.loads(out)["ok"] is True
    rc, out, err = check(str(files / "block.conf"), "--nodes", "n[01-07]", "--json")
    assert rc == 1 and json.loads(out)["problems"][0]["switch"] == "b2"


def test_node_list_from_scontrol_text_and_json(files: Path) -> None:
    text = "NodeName=n01 Arch=x86_64 CoresPerSocket=1\nNodeName=n02 Arch=x86_64\n"
    assert nodes_from_scontrol(text, "s") == ("n01", "n02")
    as_json = json.dumps({"nodes": [{"name": "n01"}, {"name": "n02"}]})  # 24.11 scontrol / 22.05 sinfo
    assert nodes_from_scontrol(as_json, "s") == ("n01", "n02")
    sinfo_2411 = json.dumps({"sinfo": [{"nodes": {"nodes": ["n03", "n04"]}}]})
    assert nodes_from_scontrol(sinfo_2411, "s") == ("n03", "n04")
    (files / "nodes.txt").write_text(text)
    rc, _, err = check(str(files / "tree.conf"), "--nodes", f"@{files / 'nodes.txt'}")
    assert rc == 1 and "switch s1 names 2 node(s) the cluster does not have: n[03-04]" in err


@pytest.mark.parametrize(("make", "expect"), [
    (lambda d: ("--nodes", "n[1-999999999]"), "--nodes: host list 'n[1-999999999]' is malformed: Too many hosts"),
    (lambda d: ("--nodes", "n[1-60000],m[1-60000]" + ",x" * 5000), "expands to more than 100,000 names"),
    (lambda d: ("--slurm-conf", str(d / "nope.conf")), "cannot read slurm.conf: file not found"),
    (lambda d: ("--slurm-conf", str(d / "latin1.conf")), "slurm.conf is not UTF-8 text"),
    (lambda d: ("--slurm-conf", str(d / "huge.conf")), "expands to more than 100,000 names"),
    (lambda d: ("--slurm-conf", str(d)), "is a directory"),
    (lambda d: ("--nodes", f"@{d / 'garbage.txt'}"), "expected `scontrol show nodes -o` lines"),
    (lambda d: ("--nodes", f"@{d / 'empty.json'}"), "no nodes: expected `scontrol show nodes --json`"),
    (lambda d: ("--nodes", "n01", "--slurm-conf", str(d / "slurm.conf")), "give one of"),
])
def test_hostile_node_lists_are_one_line(files: Path, make, expect: str) -> None:  # type: ignore[no-untyped-def]
    (files / "latin1.conf").write_bytes(b"NodeName=n\xe91 CPUs=1\n")
    (files / "huge.conf").write_text("NodeName=a[1-400]b[1-400] Feature=" + "x" * 100_000 + "\n")
    (files / "garbage.txt").write_text("\x1b[2J" * 10_000 + "\n")
    (files / "empty.json").write_text('{"nodes": [{"nope": 1}]}')
    res = runner.invoke(app, ["topology", "check", str(files / "tree.conf"), *make(files)])
    assert res.exit_code == 1 and isinstance(res.exception, InputError), res.output[:600]
    message = str(res.exception)  # railgang.daemon.cli.main prints it as one "error:" line
    assert "\n" not in message and expect in message and len(message) < 400, message[:600]


def test_the_real_command_prints_one_line(files: Path) -> None:
    (files / "latin1.conf").write_bytes(b"NodeName=n\xe91 CPUs=1\n")
    res = subprocess.run([RAILGANG, "topology", "check", str(files / "tree.conf"), "--slurm-conf",
                          str(files / "latin1.conf")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines() == [f"error: {files / 'latin1.conf'}:1: slurm.conf is not UTF-8 text: "
                                       "invalid continuation byte (byte 0xe9)"]


def test_bounded_expansion_of_a_node_line() -> None:
    with pytest.raises(InputProblem, match="more than 100,000"):
        nodes_from_slurm_conf("NodeName=n[1-60000]\nNodeName=m[1-60000]\n", "s")
