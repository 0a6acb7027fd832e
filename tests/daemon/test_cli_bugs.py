"""Bugs issue 36 item 5 found in the CLI, each held here: what the operator saw, then the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from railgang.daemon.cli import app
from railgang.errors import ExitCode

runner = CliRunner()
MAIN = "from railgang.daemon.cli import main; main()"


def test_config_check_refuses_the_backend_daemon_run_refuses(tmp_path: Path) -> None:
    """It said ok for slurm.backend = "pyslurm", which `daemon run` refuses."""
    cfg = tmp_path / "py.toml"
    cfg.write_text('[slurm]\nbackend = "pyslurm"\n')
    res = runner.invoke(app, ["config", "check", "--config", str(cfg)])
    assert res.exit_code == ExitCode.ERROR
    assert str(res.exception).startswith("slurm.backend = 'pyslurm': not supported by the daemon")


def test_config_check_prints_brackets_literally(tmp_path: Path) -> None:
    """"set RAILGANG_API__SECRET_KEY or  secret_key": the [api] was read as rich markup."""
    env = {**os.environ, "RAILGANG_ENVIRONMENT": "prod", "FORCE_COLOR": "1"}
    env.pop("RAILGANG_CONFIG", None)
    res = subprocess.run([sys.executable, "-c", MAIN, "config", "check"], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    assert res.returncode == ExitCode.ERROR
    assert "set RAILGANG_API__SECRET_KEY or [api] secret_key" in res.stderr, res.stderr
    assert len(res.stderr.splitlines()) == 1


def test_top_filtered_counts_the_jobs_shown_not_the_fleet() -> None:
    """`top -A team-b` said "GPUs in use 24/32": the whole fleet's count under a filter."""
    from rich.console import Console

    from railgang.daemon.top import render, select
    from tests.daemon.test_top import frame

    whole = frame()
    b = select(whole, accounts=["team-b"])
    assert b.gpus_shown == 4  # team-b's running job 10; the grid and fleet count stay whole
    assert b.gpus_used == whole.gpus_used and whole.gpus_shown is None
    console = Console(width=160, record=True)
    console.print(render(b, ["job"]))
    assert f"GPUs in use {whole.gpus_used}/{whole.gpus_total}, 4 by the jobs shown" in (
        console.export_text())


def test_top_from_the_daemons_database_has_no_fleet_total(tmp_path: Path) -> None:
    """"GPUs in use 128/0": the database keeps no fleet size, so no "/0"."""
    from rich.console import Console

    from railgang.daemon.top import from_daemon, render
    from tests.daemon.test_top import _daemon_db

    console = Console(width=160, record=True)
    console.print(render(from_daemon(_daemon_db(tmp_path)), ["job"]))
    text = console.export_text()
    assert "GPUs in use 16 " in text and "/0" not in text


def test_top_on_an_unmigrated_database_is_one_line(tmp_path: Path) -> None:
    """It printed a six-line SQL error; now the one line every command gives."""
    env = {**os.environ, "RAILGANG_DB__URL": f"sqlite:///{tmp_path / 'empty.sqlite'}",
           "RAILGANG_SLURM__BACKEND": "sim"}
    env.pop("SLURM_CONF", None)
    env.pop("RAILGANG_CONFIG", None)
    res = subprocess.run([sys.executable, "-c", MAIN, "top", "--once"], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    assert res.returncode == ExitCode.ERROR, res.stderr
    assert res.stderr.splitlines() == [
        "error: the daemon's database: database is at revision (empty), railgang needs "
        f"{_head()}: run `railgang db upgrade`"], res.stderr


def _head() -> str | None:
    from railgang.db.migrate import head

    return head()
