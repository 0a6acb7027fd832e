"""Users' text on an operator's terminal (issue 38 row 7; docs/security.md, "Output"): a job name,
an account, a node reason or a Slurm message is shown, never obeyed. ``railgang top``,
``explain`` (job and node), ``daemon status`` and the one-line error print control characters as
escapes and rich markup literally."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.cli.top import build_frame, render
from railgang.daemon.slurm.cli.records import parse_sinfo, parse_squeue

DATA = Path(__file__).parent / "slurm" / "cli" / "data"
EVIL = "\x1b]0;pwned\x07\x1b[2J[red]x[/red]\u202e\x9b1m"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J[red]x[/red]\\u202e\\x9b1m"


def _clean(out: str) -> None:
    """Nothing a terminal would obey came from the user: no OSC, no clear, no C1, no override."""
    for bad in ("\x1b]", "\x1b[2J", "\x07", "\u202e", "\x9b"):
        assert bad not in out, (bad, out)


def test_top_shows_a_hostile_job_name_and_account_literally() -> None:
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    for job in raw["jobs"]:
        job["name"], job["account"] = EVIL, "[bold]" + EVIL
    jobs, _ = parse_squeue(json.dumps(raw))
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    buf = io.StringIO()
    # a real terminal: rich writes its own styles, and nothing of the user's
    Console(file=buf, width=400, force_terminal=True, color_system="standard").print(
        render(build_frame(jobs, nodes, {}, problems=[f"job 3: {EVIL}"]), ["job", "name", "account"]))
    out = buf.getvalue()
    _clean(out)
    assert SHOWN in out and "[bold]" + SHOWN in out


def _db(tmp_path: Path) -> str:
    from railgang.db import migrate
    from railgang.db.repositories import journal
    from railgang.db.repositories.explanations import ExplanationRow, upsert
    from railgang.db.repositories.nodes import NodeSeen, record_node_states
    from railgang.db.session import make_engine, session_scope

    url = f"sqlite:///{tmp_path / 'rg.sqlite'}"
    migrate.upgrade(url)
    now = datetime.now(UTC)
    with session_scope(make_engine(url)) as s:
        upsert(s, [ExplanationRow("6", "waiting", EVIL, 3, 8, reason="quota", detail=EVIL,
                                  position=1, queue_length=1,
                                  data=json.dumps({"blocked_by": [EVIL], "start_refused": EVIL,
                                                   "policy": EVIL}))],
               cycle_id=1, at=now)
        record_node_states(s, "rg", [NodeSeen("n07", "drain", EVIL, 8, reason=EVIL)],
                           int(now.timestamp()))
        cycle = journal.begin_cycle(s, started_at=now, leader=EVIL, policy="default")
        journal.finish_cycle(s, cycle, finished_at=now, pending=1, running=0, actions=0,
                             failed=0, timings={}, error=EVIL)
    return url


@pytest.mark.parametrize("args", [["explain", "6"], ["explain", "n07"], ["daemon", "status"],
                                  ["top", "--once", "--source", "daemon"]])
def test_the_cli_shows_the_databases_hostile_text_literally(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.setenv("RAILGANG_DB__URL", _db(tmp_path))
    monkeypatch.setenv("RAILGANG_DAEMON__HEARTBEAT_FILE", str(tmp_path / "beat"))
    res = CliRunner().invoke(app, args)
    assert res.exit_code in (0, 4), res.output
    _clean(res.output)
    assert "\\x1b]0;pwned" in res.output, res.output


def test_the_error_line_shows_a_hostile_argument_literally(tmp_path: Path) -> None:
    env = {**os.environ, "RAILGANG_DB__URL": _db(tmp_path), "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, "-c", "from railgang.daemon.cli.main import main; main()",
                          "explain", "[bold red]boom[/] " + EVIL], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 1, res.stderr
    _clean(res.stderr)
    assert "[bold red]boom[/] " + SHOWN in res.stderr and "Traceback" not in res.stderr
