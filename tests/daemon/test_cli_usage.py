"""Usage errors speak like Slurm's: one line on stderr, ``railgang: error: ...`` with where to
look, exit 2, for every command (issue 36 item 5) -- never typer's five-line box."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from tests.daemon.test_cli_surface import COMMANDS

runner = CliRunner()


def _one_line(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert res.stdout == "", res.stdout
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    return lines[0]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_unknown_option_is_one_line_for_every_command(name: str) -> None:
    line = _one_line([*name.split(), "--no-such-flag"])
    # click may add "(Possible options: ...)" between the two
    assert line.startswith("railgang: error: No such option: --no-such-flag ")
    assert line.endswith(f" (see railgang {name} --help)")


def test_an_unknown_command_is_one_line_with_a_suggestion() -> None:
    assert _one_line(["expain"]) == ("railgang: error: No such command 'expain'. Did you mean "
                                     "'explain'? (see railgang --help)")
    assert _one_line(["daemon", "stats"]).startswith("railgang: error: No such command 'stats'.")


def test_a_missing_argument_and_a_bad_value_are_one_line() -> None:
    assert _one_line(["explain"]) == ("railgang: error: Missing argument 'job_id'. "
                                      "(see railgang explain --help)")
    line = _one_line(["top", "--format", "job,colour"])
    assert line.startswith("railgang: error: Invalid value for '--format'")


def test_the_message_is_not_markup_nor_a_control_sequence() -> None:
    line = _one_line(["explain", "--[bold]x\x1b[31m"])
    assert "--[bold]x" in line and "\x1b" not in line


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_every_option_name_whole_in_80_columns(name: str) -> None:
    """`sim --help` cut names at 80 columns ("--fair-share-half-l…"); and seven sub-commands
    offered --install-completion, which belongs to `railgang completion` (issue 36 item 5)."""
    res = runner.invoke(app, [*name.split(), "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    words = set(re.findall(r"--?[\w][\w-]*", res.stdout))
    for param in COMMANDS[name].params:
        if getattr(param, "hidden", False):
            continue
        for opt in (*param.opts, *param.secondary_opts):
            if opt.startswith("-"):
                assert opt in words, f"`railgang {name} --help` does not show {opt} whole"
    assert "--install-completion" not in res.stdout and "--show-completion" not in res.stdout


@pytest.mark.parametrize("args", [[], ["daemon"], ["quota"]])
def test_a_group_without_a_command_shows_its_help_not_an_empty_error(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "Usage: railgang" in res.output
    assert "railgang: error" not in res.output, res.output
