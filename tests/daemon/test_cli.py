"""The railgang command's surface: help lists every component, --version works."""

from __future__ import annotations

from typer.testing import CliRunner

from railgang.daemon import __version__
from railgang.daemon.cli.main import app


def test_help_lists_subcommands() -> None:
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("config", "db", "devcluster", "topology", "place", "sim"):
        assert cmd in res.output


def test_version() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"railgang {__version__}"
