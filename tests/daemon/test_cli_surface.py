"""The ``railgang`` command is one surface (STYLE.md 19): ``--json`` wherever something is
reported, spelled and described the same way; choices validated by typer; one exit-code table;
settings in the typer context, not a module global; config file problems are one line."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from railgang.daemon.cli.common import JSON_HELP
from railgang.daemon.cli.main import app
from railgang.errors import ConfigError, ExitCode

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()

# Commands that report nothing a script would parse, each with the reason.
NO_JSON = {
    "daemon run": "a service: it writes logs, machine-readable with --log-format json",
    "api": "a service: uvicorn serves the API until stopped",
    "topology generate": "its output is a topology.conf, itself the machine-readable format",
    "completion": "its output is a shell script",
}


def _commands(cmd: typer.core.TyperGroup | typer.core.TyperCommand, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[str, typer.core.TyperCommand]]:
    if not isinstance(cmd, typer.core.TyperGroup):
        yield " ".join(path), cmd  # type: ignore[misc]
        return
    plain = getattr(cmd, "plain", None)  # `sim`: a command that has a sub-command too (sweep)
    if plain is not None:
        yield " ".join(path), plain
    ctx = typer.Context(cmd)  # the root's components are imported on first get_command
    for name in cmd.list_commands(ctx):
        sub = cmd.get_command(ctx, name)
        assert sub is not None, name
        yield from _commands(sub, (*path, name))  # type: ignore[arg-type]


COMMANDS = dict(_commands(typer.main.get_command(app)))  # type: ignore[arg-type]


def test_the_walk_finds_every_component() -> None:
    for name in ("config show", "db current", "devcluster status", "topology check", "place",
                 "sim", "demo", "top", "daemon status", "explain", "quota tree", "token list",
                 "ledger reconcile"):
        assert name in COMMANDS
    assert set(NO_JSON) <= set(COMMANDS), "the allow-list names a command that no longer exists"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_reporting_command_has_json(name: str) -> None:
    flags = [p for p in COMMANDS[name].params if "--json" in getattr(p, "opts", ())]
    if name in NO_JSON:
        assert not flags, f"{name} has --json now: take it off the allow-list"
        return
    assert len(flags) == 1, f"`railgang {name}` reports something but has no --json"
    assert flags[0].help == JSON_HELP  # type: ignore[attr-defined]
    # no other spelling of the same idea
    assert not [o for p in COMMANDS[name].params for o in getattr(p, "opts", ())
                if o in ("--as-json", "--output-json", "-j")]


def _exits(path: Path) -> list[str]:
    """``typer.Exit(<int literal>)`` / ``sys.exit(<int literal>)`` calls: the table is bypassed."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = ast.unparse(node.func)
            if func.endswith(("Exit", "sys.exit")) and isinstance(node.args[0].value, int):
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    return bad


def test_exits_go_through_the_table() -> None:
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4]
    modules = [p for d in ("daemon", "topology", "db", "slurm_plugins") for p in (REPO / d).rglob("*.py")
               if "import typer" in p.read_text(encoding="utf-8")]
    assert len(modules) >= 11
    assert [b for p in modules for b in _exits(p)] == []


def test_exit_codes_are_documented() -> None:
    doc = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for code in ExitCode:
        assert f"| {int(code)} " in doc, f"docs/cli.md lacks exit code {int(code)}"
    for name in COMMANDS:
        assert f"`railgang {name}" in doc, f"docs/cli.md does not describe `railgang {name}`"
    assert "docs/cli.md" in (REPO / "README.md").read_text(encoding="utf-8")


# -- settings through the context ----------------------------------------------------------------
def _config(tmp_path: Path, name: str, nodes: int) -> Path:
    path = tmp_path / name
    path.write_text(f"[devcluster]\nnodes = {nodes}\n")
    return path


def test_each_invocation_reads_its_own_config(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAILGANG_CONFIG", raising=False)
    monkeypatch.delenv("RAILGANG_DEVCLUSTER__NODES", raising=False)
    seen = []
    for args in (["--config", str(_config(tmp_path, "a.toml", 3))],
                 ["--config", str(_config(tmp_path, "b.toml", 5))], []):
        res = runner.invoke(app, [*args, "config", "show", "--json"])
        assert res.exit_code == 0, res.output
        seen.append(json.loads(res.output)["devcluster"]["nodes"])
    assert seen == [3, 5, 16]  # nothing leaks from one invocation into the next


def test_no_settings_global_left() -> None:
    import railgang.daemon.cli.main as cli

    assert not hasattr(cli, "_State") and not hasattr(cli, "settings")


def test_help_needs_no_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_CONFIG", "/nonexistent/railgang.toml")
    for args in (["--help"], ["daemon", "--help"], ["db", "current", "--help"]):
        assert runner.invoke(app, args).exit_code == 0, args
    res = runner.invoke(app, ["config", "show"])
    assert res.exit_code == 1 and isinstance(res.exception, ConfigError)


# -- choices validated by typer ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "choices"),
    [
        (["daemon", "run", "--log-format", "xml"], ("json", "text")),
        (["ledger", "telemetry", "x.csv", "--format", "xml"], ("nvidia-smi", "dcgm")),
        (["token", "create", "t", "--role", "root"], ("admin", "team-admin", "team-reader")),
        (["quota", "rate", "h100", "cheap", "1.0"], ("reserved", "on-demand", "spot", "borrowed")),
        (["quota", "grant", "1", "group", "x"], ("account", "user", "qos")),
        (["quota", "add", "x", "--level", "company"], ("org", "dept", "team")),
        (["api", "--log-level", "loud"], ("info", "debug")),
    ],
    ids=["log-format", "telemetry-format", "role", "capacity", "grant-kind", "level", "api-level"],
)
def test_wrong_choice_is_a_usage_error_listing_the_valid_ones(args: list[str],
                                                              choices: tuple[str, ...]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == ExitCode.USAGE, res.output
    text = " ".join(res.output.replace("│", " ").split())
    assert "is not one of" in text and all(f"'{c}'" in text for c in choices), text


def test_class_out_of_range_is_a_usage_error() -> None:
    assert runner.invoke(app, ["quota", "grant", "7", "account", "x"]).exit_code == ExitCode.USAGE


# -- config file errors: one line naming the file ------------------------------------------------
def _bad_config(tmp_path: Path, kind: str) -> tuple[str, str]:
    """(path, what the one line must contain)."""
    p = tmp_path / "railgang.toml"
    if kind == "directory":
        return str(tmp_path), f"{tmp_path}: is a directory"
    if kind == "missing":
        return str(p), f"{p}: cannot read config file: file not found"
    if kind == "dev-zero":
        return "/dev/zero", "/dev/zero: is a character device"  # refused unread
    if kind == "huge":
        p.write_text("# padding\n" * 200_000)
        return str(p), f"{p}: config file is larger than 1 MiB"
    if kind == "not-utf8":
        p.write_bytes(b"[db]\nurl = \"caf\xe9\"\n")
        return str(p), f"{p}:2: config file is not UTF-8"
    if kind == "binary":
        p.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00")
        return str(p), f"{p}:1: config file contains NUL bytes"
    p.write_text('[daemon]\npolicy = "fifo"\n[db\n')
    return str(p), f"{p}:3: config file is not valid TOML"


KINDS = ["directory", "missing", "dev-zero", "huge", "not-utf8", "binary", "invalid-toml"]


@pytest.mark.parametrize("kind", KINDS)
def test_config_file_problem_is_one_line(tmp_path: Path, kind: str) -> None:
    path, expected = _bad_config(tmp_path, kind)
    res = runner.invoke(app, ["--config", path, "config", "show"])
    assert res.exit_code == ExitCode.ERROR and isinstance(res.exception, ConfigError), res.output
    message = str(res.exception)
    assert message.startswith(expected) and "\n" not in message, message


def test_empty_config_file_means_defaults(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    res = runner.invoke(app, ["--config", str(empty), "config", "show", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["devcluster"]["nodes"] == 16


@pytest.mark.parametrize("kind", ["directory", "dev-zero", "not-utf8"])
def test_main_prints_the_config_problem_without_traceback(tmp_path: Path, kind: str) -> None:
    path, expected = _bad_config(tmp_path, kind)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAILGANG_")}
    res = subprocess.run([sys.executable, "-c", "from railgang.daemon.cli.main import main; main()",
                          "--config", path, "config", "show"], capture_output=True, text=True,
                         check=False, timeout=60, env=env)
    assert res.returncode == ExitCode.ERROR
    assert res.stderr.count("\n") == 1 and expected in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


# -- one meaning per flag name --------------------------------------------------------------------
# flags that once meant two things: the commands that may have them now (a renamed spelling stays
# as a hidden, deprecated alias for a while)
ONE_MEANING = {"--gpus": {"place"},  # a GPU count; sim's pool spec is --gpu-pools
               "--limit": {"sim"},  # a number of jobs; quota's burst limit is --burst-limit
               "--format": {"sim", "ledger telemetry", "top"}}  # the format of what is read/shown


@pytest.mark.parametrize("flag", sorted(ONE_MEANING))
def test_one_meaning_per_flag(flag: str) -> None:
    visible = {name for name, cmd in COMMANDS.items() for p in cmd.params
               if flag in getattr(p, "opts", ()) and not getattr(p, "hidden", False)}
    assert visible == ONE_MEANING[flag]


def test_renamed_flags_are_deprecated_aliases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_DB__URL", f"sqlite:///{tmp_path / 'q.sqlite'}")
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    assert runner.invoke(app, ["quota", "add", "acme", "--level", "org"]).exit_code == 0
    res = runner.invoke(app, ["quota", "set", "acme", "--guaranteed", "8", "--limit", "16", "--json"])
    assert res.exit_code == 0 and "--limit is deprecated" in res.stderr, res.output
    assert json.loads(res.stdout)["limit_gpus"] == 16
    res = runner.invoke(app, ["quota", "set", "acme", "--guaranteed", "8", "--limit", "16",
                              "--burst-limit", "16"])
    assert res.exit_code == ExitCode.USAGE


def test_config_check(tmp_path: Path) -> None:
    good = _config(tmp_path, "good.toml", 3)
    res = runner.invoke(app, ["config", "check", "--json", "--config", str(good)])
    assert res.exit_code == 0 and json.loads(res.output) == {"ok": True, "config": str(good)}
    path, expected = _bad_config(tmp_path, "invalid-toml")
    res = runner.invoke(app, ["config", "check", "--config", path])
    assert res.exit_code == ExitCode.ERROR and str(res.exception).startswith(expected)
    typo = tmp_path / "typo.toml"
    typo.write_text('[daemon]\npolicy = "tiresas"\n')
    res = runner.invoke(app, ["config", "check", "--config", str(typo)])
    assert res.exit_code == ExitCode.ERROR
    assert str(res.exception).startswith("daemon.policy: unknown policy 'tiresas'; known: default")


def test_config_show_loads_back(tmp_path: Path) -> None:
    """`config show` is TOML that loads to the same configuration: unset values (None) are
    commented lines, nested groups ([daemon.links]) are tables; it printed `conf = null` before."""
    first = runner.invoke(app, ["config", "show"])
    assert first.exit_code == 0, first.output
    assert "= null" not in first.output and "# conf = (unset)" in first.output
    saved = tmp_path / "shown.toml"
    saved.write_text(first.output)
    assert runner.invoke(app, ["config", "check", "--config", str(saved)]).exit_code == 0
    again = runner.invoke(app, ["config", "show", "--config", str(saved)])
    assert again.exit_code == 0 and again.output == first.output
