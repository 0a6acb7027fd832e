"""``railgang paths``: the installed plugin files, each present and shipped as package data."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.slurm_plugins.paths import FILES, PLUGINS

REPO = Path(__file__).resolve().parents[2]


def test_paths_lists_existing_files() -> None:
    res = CliRunner().invoke(app, ["paths", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert Path(data["job_submit_lua"]["path"]).name == "job_submit.lua"
    assert Path(data["spank_source"]["path"]).name == "railgang_spank.c"
    assert all(data[name]["exists"] for name in FILES)
    text = CliRunner().invoke(app, ["paths"]).output
    assert str(FILES["job_submit_lua"]) in text


def test_every_file_is_package_data() -> None:
    """A wheel install has them too (pyproject's package-data for railgang.slurm_plugins)."""
    with (REPO / "pyproject.toml").open("rb") as fh:
        patterns = tomllib.load(fh)["tool"]["setuptools"]["package-data"]["railgang.slurm_plugins"]
    for name, path in FILES.items():
        rel = path.relative_to(PLUGINS).as_posix()
        assert any(fnmatch.fnmatch(rel, p) and rel.count("/") == p.count("/") for p in patterns), name
