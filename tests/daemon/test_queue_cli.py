"""``railgang queue``: the waiting jobs as squeue lists them, with railgang's reason, class,
place in the order and expected start, from what ``explain`` already reads (the daemon's
database) joined with squeue's users and partitions (issue 36 item 5)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.cli.queue import queue_rows, render_queue

runner = CliRunner()
EST = {"status": "estimated", "start_s": 600.0, "p10_s": 500.0, "p90_s": 900.0,
       "as_of": 0.0, "age_s": 120.0}


def _explained() -> list[dict[str, object]]:
    return [
        {"job_id": "12", "account": "team-b", "priority_class": 3, "gpus": 16, "position": 2,
         "queue_length": 3, "reason": "quota", "estimate": {"status": "never", "note": "x"}},
        {"job_id": "11", "account": "team-a", "priority_class": 1, "gpus": 8, "position": 1,
         "queue_length": 3, "reason": "waiting_for_gpus", "estimate": EST},
        {"job_id": "13", "account": "team-a", "priority_class": 2, "gpus": 4, "position": 3,
         "queue_length": 3, "reason": "topology"},
    ]


SLURM = {"11": ("alice", "gpu"), "12": ("bob", "gpu,long"), "13": ("alice", "debug")}


def test_rows_in_the_order_with_users_partitions_and_filters() -> None:
    rows = queue_rows(_explained(), SLURM)
    assert [(r["job_id"], r["user"], r["partition"]) for r in rows] == [
        ("11", "alice", "gpu"), ("12", "bob", "gpu,long"), ("13", "alice", "debug")]
    assert rows[0]["start"] == "in 8 min" and rows[1]["start"] == "never"
    assert rows[2]["start"] == ""
    assert [r["job_id"] for r in queue_rows(_explained(), SLURM, users={"alice"})] == ["11", "13"]
    assert [r["job_id"] for r in queue_rows(_explained(), SLURM, accounts={"team-b"})] == ["12"]
    assert [r["job_id"] for r in queue_rows(_explained(), SLURM, partitions={"long"})] == ["12"]
    # a job squeue no longer lists as pending has left the queue since the daemon's cycle
    assert [r["job_id"] for r in queue_rows(_explained(), {"11": ("alice", "gpu")})] == ["11"]


def test_render_is_columns_under_a_header() -> None:
    lines = render_queue(queue_rows(_explained(), SLURM))
    assert lines[0].split() == ["JOBID", "PARTITION", "USER", "ACCOUNT", "CLASS", "GPUS", "POS",
                                "START", "REASON"]
    assert lines[1].split() == ["11", "gpu", "alice", "team-a", "1", "8", "1/3", "in", "8",
                                "min", "waiting_for_gpus"]
    assert render_queue([]) == ["(no waiting jobs)"]


def _daemon_db(tmp_path: Path) -> str:
    from railgang.db import migrate
    from railgang.db.repositories.explanations import ExplanationRow, upsert
    from railgang.db.session import make_engine, session_scope

    url = f"sqlite:///{tmp_path / 'rg.sqlite'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    with session_scope(engine) as s:
        upsert(s, [ExplanationRow("5", "running", "team-a", 1, 16, nodes="n[01-02]"),
                   ExplanationRow("6", "waiting", "team-b", 3, 8, reason="quota", position=1,
                                  queue_length=1)],
               cycle_id=1, at=datetime.now(UTC))
    engine.dispose()
    return url


def test_queue_from_the_daemons_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setenv("RAILGANG_DB__URL", _daemon_db(tmp_path))
    monkeypatch.setenv("RAILGANG_SLURM__BACKEND", "sim")
    res = runner.invoke(app, ["queue", "--json"])
    assert res.exit_code == 0, res.output
    assert [(r["job_id"], r["reason"]) for r in json.loads(res.stdout)] == [("6", "quota")]
    res = runner.invoke(app, ["queue", "-A", "team-a"])
    assert res.exit_code == 0 and res.stdout == "(no waiting jobs)\n", res.output
    res = runner.invoke(app, ["queue", "--me"])  # users are Slurm's: none to filter on here
    assert res.exit_code == 1 and "squeue" in str(res.exception), res.output
