"""``railgang daemon status`` and ``railgang explain`` when the database cannot be reached (issue 38
row 8): one line naming the database (password masked) and a non-zero exit, never a traceback
and never "no record of it" (which would send the operator looking for the wrong problem)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.errors import DatabaseError

REFUSED = "postgresql+psycopg://railgang:pg-s3cret@127.0.0.1:1/railgang?sslpassword=k-s3cret"


def _urls(tmp_path: Path) -> list[str]:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return [REFUSED, f"sqlite:///{blocker}/under-a-file/railgang.sqlite"]


@pytest.mark.parametrize("args", [["daemon", "status"], ["daemon", "status", "--json"],
                                  ["explain", "5"], ["explain", "n07"]])
@pytest.mark.parametrize("which", [0, 1], ids=["refused", "sqlite-folder"])
def test_an_unreachable_database_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             args: list[str], which: int) -> None:
    monkeypatch.setenv("RAILGANG_DB__URL", _urls(tmp_path)[which])
    monkeypatch.setenv("RAILGANG_DAEMON__HEARTBEAT_FILE", str(tmp_path / "beat"))
    res = CliRunner().invoke(app, args)
    assert isinstance(res.exception, DatabaseError), res.exception  # main() prints it as one line
    message = str(res.exception)
    assert "\n" not in message and "no record" not in message
    assert "s3cret" not in message and ("127.0.0.1" in message or "under-a-file" in message)
