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
