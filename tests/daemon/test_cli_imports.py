"""``railgang --help`` starts at once: what each ``--help`` imports, not how long it takes
(a time would depend on the machine's load). The root lists its components from a table
(daemon/cli/lazy.py) without importing them; a component's ``--help`` imports its own module only.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from railgang.daemon.cli.lazy import LazyGroup, hoist_global_flags, load_component
from railgang.daemon.cli.main import app

runner = CliRunner()

# what a --help must not pay for (each costs 50-350 ms to import)
HEAVY = {"sqlalchemy", "networkx", "fastapi", "starlette", "uvicorn", "alembic", "psycopg",
         "apscheduler", "matplotlib", "jinja2", "pandas", "scipy",
         "pydantic_settings"}  # the settings are read on first use, never by --help
# the root needs none of these either (typer's parameter types import pydantic for a command)
ROOT_ALSO = {"pydantic", "numpy", "hostlist"}

PROBE = """
import json, sys
from railgang.daemon.cli.main import app
for argv in json.loads(sys.argv[1]):
    try:
        app(argv, prog_name="railgang")
    except SystemExit:
        pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""


def imported_by(*argvs: list[str]) -> set[str]:
    """Top-level packages imported by a fresh process that runs these command lines."""
    res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs)], capture_output=True,
                         text=True, timeout=120, check=False)
    return set(json.loads(res.stderr.strip().splitlines()[-1]))


def test_root_help_imports_no_component() -> None:
    got = imported_by(["--help"]) & (HEAVY | ROOT_ALSO)
    assert not got, f"`railgang --help` imports {sorted(got)}"


def _subcommands(name: str) -> list[list[str]]:
    group = typer.main.get_command(app)
    cmd = group.get_command(typer.Context(group), name)  # type: ignore[attr-defined]
    subs = cmd.list_commands(typer.Context(cmd)) if isinstance(cmd, typer.core.TyperGroup) else []
    return [[name, "--help"], *([name, s, "--help"] for s in subs)]


@pytest.mark.parametrize("name", sorted(LazyGroup.components))
def test_component_help_imports_nothing_heavy(name: str) -> None:
    got = imported_by(*_subcommands(name)) & HEAVY
    assert not got, f"`railgang {name} … --help` imports {sorted(got)}"


@pytest.mark.parametrize("name", sorted(LazyGroup.components))
def test_table_help_is_the_commands_own(name: str) -> None:
    comp = LazyGroup.components[name]
    cmd = load_component(name, comp)
    first = " ".join((cmd.short_help or (cmd.help or "").split("\n\n")[0]).split())
    assert comp.help == first, f"daemon/cli/main.py's line for {name} differs from the command's help"


def test_dash_h_is_help() -> None:
    for args in (["-h"], ["db", "-h"], ["db", "current", "-h"], ["sim", "-h"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 0 and "Usage" in res.output, args


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["db", "current", "--config", "x.toml"], ["--config", "x.toml", "db", "current"]),
        (["db", "current", "--config=x.toml", "--json"], ["--config=x.toml", "db", "current", "--json"]),
        (["-c", "a.toml", "db", "current"], ["-c", "a.toml", "db", "current"]),
        (["--config", "db", "db", "current"], ["--config", "db", "db", "current"]),
        (["sim", "--", "--config", "x"], ["sim", "--", "--config", "x"]),
        (["--version"], ["--version"]),
    ],
    ids=["after", "equals", "before", "value-is-a-command-name", "after-double-dash", "none"],
)
def test_global_flags_are_hoisted(args: list[str], expected: list[str]) -> None:
    assert hoist_global_flags(args, [*sorted(LazyGroup.components), "config"]) == expected


def test_config_after_the_subcommand(tmp_path: object) -> None:
    from pathlib import Path

    conf = Path(str(tmp_path)) / "a.toml"
    conf.write_text("[devcluster]\nnodes = 3\n")
    res = runner.invoke(app, ["config", "show", "--json", "--config", str(conf)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["devcluster"]["nodes"] == 3


def test_completion_is_installable() -> None:
    """`railgang completion SHELL` prints the script (daemon/cli/complete.py); typer's own
    --install-completion is gone from every help (issue 36 item 5)."""
    res = runner.invoke(app, ["--help"])
    assert "completion" in res.output and "--install-completion" not in res.output


def test_quota_cli_any_gpu_is_the_cores() -> None:
    from railgang.daemon.cli import quota as quota_cli
    from railgang.daemon.core.model.quota import ANY_GPU

    assert quota_cli.ANY_GPU == ANY_GPU  # a copy, so that `quota --help` skips the core


def test_tab_completion_lists_commands_and_options() -> None:
    from pathlib import Path

    exe = str(Path(sys.executable).with_name("railgang"))

    def complete(words: str) -> list[str]:
        env = {"_RAILGANG_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - 1), "PATH": "/usr/bin:/bin"}
        res = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=60,
                             check=False)
        return res.stdout.split()

    assert {"token", "topology", "top"} <= set(complete("railgang to"))
    assert {"--user", "--account", "--format", "--me"} <= set(complete("railgang top --"))
    res = runner.invoke(app, ["completion", "bash"])
    assert "_railgang_complete" in res.output
