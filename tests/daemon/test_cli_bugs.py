"""Bugs issue 36 item 5 found in the CLI, each held here: what the operator saw, then the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.errors import ExitCode

runner = CliRunner()
MAIN = "from railgang.daemon.cli.main import main; main()"


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

    from railgang.daemon.cli.top import render, select
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

    from railgang.daemon.cli.top import from_daemon, render
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


def test_relative_times_read_one_way() -> None:
    """"in 3 min", "5 min ago": explain, daemon status and top say times the same way."""
    from railgang.daemon.when import ago, from_now, span

    assert (span(45), span(300), span(3 * 3600), span(3 * 86400)) == ("45 s", "5 min", "3.0 h",
                                                                       "3.0 d")
    assert ago(300) == "5 min ago" and ago(-2) == "0 s ago"
    assert from_now(180) == "in 3 min" and from_now(0.4) == "now"


def test_an_estimate_with_equal_bounds_says_one_time_from_now() -> None:
    """"expected start: in 3 min (p10-p90 4 min - 4 min": the bounds were counted from when the
    estimate was made, the start from now, and equal bounds were printed twice."""
    from railgang.daemon.service.estimate import render_estimate

    est = {"status": "estimated", "start_s": 240.0, "p10_s": 240.0, "p90_s": 250.0,
           "age_s": 60.0, "simulations": 5, "policy": "default"}
    line = render_estimate(est)
    assert line.startswith("  expected start: in 3 min (p10-p90 in 3 min from the estimate;"), line
    wide = render_estimate({**est, "p90_s": 900.0})
    assert "in 3 min (p10-p90 in 3 min - 14 min from" in wide, wide


def test_daemon_status_says_how_long_ago_not_an_iso_timestamp() -> None:
    from railgang.daemon.service.status import render_status

    st = {"running": True, "journal": {"applied": 3},
          "leader": {"host": "h1", "pid": 42, "since": "2026-12-03T20:00:00+00:00",
                     "age_s": 7200.0, "backend": "cli", "policy": "default"},
          "last_cycle": {"id": 9, "finished_at": "2026-12-03T21:59:55+00:00", "age_s": 5.0,
                         "duration_ms": 230.0, "pending": 2, "running": 1, "actions": 0,
                         "failed": 0, "error": None},
          "heartbeat": {"file": "/run/rg/heartbeat", "age_s": 3.0}}
    text = "\n".join(render_status(st))
    assert "2026-12-03" not in text, text
    assert "leader: pid 42 on h1, leading for 2.0 h (cli backend, default policy)" in text
    assert "last cycle: #9, 5 s ago (230 ms): 2 pending" in text
    assert "heartbeat: /run/rg/heartbeat: written 3 s ago" in text


def test_explain_says_how_long_ago_as_everywhere() -> None:
    from railgang.daemon.service.status import render

    e = {"job_id": "7", "account": "a", "priority_class": 3, "gpus": 8, "cycle": 4,
         "age_s": 300.0, "state": "waiting", "reason": "quota"}
    assert "as of cycle 4, 5 min ago" in render(e)


def test_explain_node_says_how_long_ago_too() -> None:
    from railgang.daemon.service.explain_node import render_node

    e = {"node": "n01", "gpus": 8, "gpu_type": "h100", "state": "drain", "since": 0.0,
         "age_s": 3 * 3600.0, "flaky": False, "reason": "bad"}
    assert render_node(e).startswith("node n01 (8 x h100): drain since 1970-01-01 00:00 UTC, "
                                     "3.0 h ago\n")


def test_token_list_has_a_header_and_the_expiry(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """It printed tab-joined rows with no header and no expiry."""
    from railgang.db import migrate

    url = f"sqlite:///{tmp_path / 'rg.sqlite'}"
    migrate.upgrade(url)
    monkeypatch.setenv("RAILGANG_DB__URL", url)
    for acct in (["ml", "--level", "org"], ["r", "--level", "dept", "--parent", "ml"],
                 ["team-a", "--level", "team", "--parent", "r"]):
        assert runner.invoke(app, ["quota", "add", *acct]).exit_code == 0
    for args in (["ci", "--role", "team-reader", "--team", "team-a", "--expires-days", "7"],
                 ["ops", "--role", "admin"]):
        assert runner.invoke(app, ["token", "create", *args]).exit_code == 0
    assert runner.invoke(app, ["token", "revoke", "ops"]).exit_code == 0
    res = runner.invoke(app, ["token", "list"])
    assert res.exit_code == 0, res.output
    head, ci, ops = res.stdout.splitlines()
    assert head.split() == ["NAME", "ROLE", "TEAMS", "PREFIX", "EXPIRES", "STATE"]
    assert ci.split()[:3] == ["ci", "team-reader", "team-a"]
    assert "(in 7.0 d)" in ci and ci.split()[-1] == "active"
    assert ops.split()[:3] == ["ops", "admin", "*"] and " never " in ops
    assert ops.split()[-1] == "revoked"
    assert "\t" not in res.stdout
