from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app

runner = CliRunner()

TRACE = """job_id,submit_time,gpus,duration_s,account
a,0,8,100,red
b,0,8,50,blue
"""


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run(*args: str) -> object:
    return runner.invoke(app, ["sim", *args, "--quiet"])


def test_json_results_for_two_full_node_jobs(tmp_path: Path) -> None:
    trace = write(tmp_path, TRACE)
    result = run("--trace", str(trace), "--nodes", "1", "--gpus-per-node", "8", "--leaf", "1",
                 "--policy", "fifo", "--json")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    fifo = data["results"]["fifo"]
    assert fifo["mean_jct_s"] == 125.0 and fifo["finished"] == 2 and fifo["makespan_s"] == 150.0
    assert data["cluster"]["gpus"] == 8
    assert {a["account"] for a in fifo["per_account"]} == {"red", "blue"}


def test_compare_prints_tables_and_ratios_and_writes_jobs_csv(tmp_path: Path) -> None:
    trace = write(tmp_path, TRACE)
    out = tmp_path / "jobs.csv"
    result = run("--trace", str(trace), "--nodes", "2", "--leaf", "2",
                 "--compare", "fifo,tiresias", "--jobs-csv", str(out))
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    text = result.stdout  # type: ignore[attr-defined]
    assert "ratio vs fifo" in text and "tiresias" in text and "mean JCT" in text
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert len(rows) == 4 and {r["policy"] for r in rows} == {"fifo", "tiresias"}


def test_compare_json_has_ratios(tmp_path: Path) -> None:
    trace = write(tmp_path, TRACE)
    result = run("--trace", str(trace), "--nodes", "1", "--leaf", "1", "--compare",
                 "fifo,slurm", "--json")
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert data["ratios_vs_fifo"]["fifo"]["mean_jct_s"] == 1.0


def test_malformed_rows_warn_with_line_numbers_and_strict_fails(tmp_path: Path) -> None:
    trace = write(tmp_path, TRACE + "c,zero,1,10,red\n")
    result = run("--trace", str(trace), "--nodes", "1", "--leaf", "1", "--policy", "fifo")
    assert result.exit_code == 0
    assert "t.csv:4: submit_time" in result.stderr  # type: ignore[attr-defined]
    strict = run("--trace", str(trace), "--nodes", "1", "--leaf", "1", "--policy", "fifo",
                 "--strict")
    assert strict.exit_code != 0
    assert isinstance(strict.exception, Exception)  # type: ignore[attr-defined]
    assert "t.csv:4: submit_time" in str(strict.exception)  # type: ignore[attr-defined]


def test_oversize_job_is_reported_rejected(tmp_path: Path) -> None:
    trace = write(tmp_path, TRACE + "huge,1,64,10,red\n")
    result = run("--trace", str(trace), "--nodes", "1", "--leaf", "1", "--policy", "fifo",
                 "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["results"]["fifo"]["rejected"] == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--topology", "/nonexistent/topology.conf"], "cannot read topology"),
    ],
    ids=["topology"],
)
def test_bad_options_are_railgang_errors(tmp_path: Path, args: list[str], fragment: str) -> None:
    trace = write(tmp_path, TRACE)
    result = run("--trace", str(trace), *args)
    assert result.exit_code != 0
    assert fragment in str(result.exception)  # type: ignore[attr-defined]


def test_format_choices_come_from_the_registry(tmp_path: Path) -> None:
    from railgang.daemon.sim import traces

    assert traces.names() == ("csv", "philly-gavel")
    result = run("--trace", str(write(tmp_path, TRACE)), "--format", "xml")
    assert result.exit_code == 2  # a usage error, caught by typer before anything runs
    assert "csv" in result.output and "philly-gavel" in result.output  # type: ignore[attr-defined]


@pytest.mark.parametrize("args", [["--policy", "nope"], ["--compare", "fifo,nope"]],
                         ids=["policy", "compare"])
def test_policy_choices_come_from_the_registry(tmp_path: Path, args: list[str]) -> None:
    from railgang.daemon.core.policies import registry
    result = run("--trace", str(write(tmp_path, TRACE)), *args)
    assert result.exit_code == 2  # a usage error listing what the registry knows
    out = " ".join(result.output.replace("│", " ").split())  # type: ignore[attr-defined]
    assert "'nope' is not one of" in out and all(repr(n) in out for n in registry.names())


def test_main_prints_one_line_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from railgang.daemon.cli import main as cli

    monkeypatch.setattr("sys.argv", ["railgang", "sim", "--trace", str(tmp_path / "missing.csv")])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "missing.csv" in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_topology_file(tmp_path: Path) -> None:
    conf = write(tmp_path, "SwitchName=s1 Nodes=gpu[01-02]\n", "topology.conf")
    trace = write(tmp_path, TRACE)
    result = run("--trace", str(trace), "--topology", str(conf), "--policy", "fifo", "--json")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    data = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert data["cluster"]["gpus"] == 16 and data["results"]["fifo"]["mean_jct_s"] == 75.0
