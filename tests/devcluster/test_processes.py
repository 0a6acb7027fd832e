"""Processes are stopped by recorded PID only, and never when the PID now belongs to another."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from pathlib import Path

from railgang.devcluster.processes import ProcessTable, is_running, port_in_use


def test_start_record_stop(tmp_path: Path) -> None:
    table = ProcessTable(tmp_path / "pids")
    rec = table.start("sleeper", ["sleep", "60"], log=tmp_path / "sleeper.log")
    assert is_running(rec)
    assert table.get("sleeper") == rec
    table.stop(rec)
    assert not is_running(rec)
    assert table.records() == []


def test_stop_spares_a_recycled_pid(tmp_path: Path) -> None:
    """A record whose start time does not match is not ours: it must not be signalled."""
    other = subprocess.Popen(["sleep", "60"])
    try:
        table = ProcessTable(tmp_path / "pids")
        rec = table.start("mine", ["sleep", "60"], log=tmp_path / "mine.log")
        # the record's PID now names a process that started at another time: not ours
        forged = replace(rec, pid=other.pid, start_ticks=rec.start_ticks - 1000)
        table.stop(forged)
        assert other.poll() is None  # still alive
        table.stop(rec)
    finally:
        other.kill()
        other.wait()


def test_unreadable_record_is_dropped(tmp_path: Path) -> None:
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / "bad.json").write_text("{not json")
    assert ProcessTable(tmp_path / "pids").records() == []


def test_port_in_use() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert port_in_use(s.getsockname()[1])
