"""The daemon keeps job_submit.lua's class grants file current: written from the database each
cycle, atomically and only when the grants changed, restored if removed, and kept current even
in a cycle whose Slurm side failed; a write that fails never fails the cycle."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from railgang.daemon.clock import SimClock
from railgang.db.repositories import admin
from railgang.topology.inputs import write_if_changed
from tests.daemon.service.conftest import Crash, Crashing, cluster, service

SEEDED = ["limit 2 14400", "open 3"]  # what the migration's classes put in a fresh file


def _lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if not ln.startswith("#")]


def _grant(engine: Engine, class_id: int, kind: str, subject: str) -> int:
    with Session(engine) as s:
        g = admin.grant(s, actor="test", class_id=class_id, kind=kind, subject=subject)
        s.commit()
        return g.id


def test_written_on_change_only(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "state" / "grants"  # the directory is made on the first write
    svc = service(engine, cluster(), SimClock(0.0), grants_file=path)
    first = svc.run_once()
    assert first.grants_written and _lines(path) == SEEDED and "grants" in first.timings_ms
    stat = path.stat()
    assert not svc.run_once().grants_written
    assert path.stat().st_mtime_ns == stat.st_mtime_ns and path.stat().st_ino == stat.st_ino

    grant_id = _grant(engine, 0, "user", "alice")
    _grant(engine, 2, "qos", "interactive")
    assert svc.run_once().grants_written
    assert _lines(path) == [*SEEDED, "0 user alice", "2 qos interactive"]
    assert path.stat().st_ino != stat.st_ino  # replaced by rename, never rewritten in place
    assert oct(path.stat().st_mode & 0o777) == "0o644"  # slurmctld's user must read it

    with Session(engine) as s:
        admin.revoke_grant(s, actor="test", grant_id=grant_id)
        s.commit()
    assert svc.run_once().grants_written and _lines(path) == [*SEEDED, "2 qos interactive"]
    assert svc.grants is not None and svc.grants.writes == 3
    assert [p.name for p in path.parent.iterdir()] == ["grants"]  # no temporary files left


def test_a_removed_file_is_restored(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "grants"
    svc = service(engine, cluster(), SimClock(0.0), grants_file=path)
    svc.run_once()
    path.unlink()
    assert svc.run_once().grants_written and _lines(path) == SEEDED
    path.write_text("0 account everyone\n")  # edited by hand: the database wins
    assert svc.run_once().grants_written and _lines(path) == SEEDED


def test_kept_current_when_slurm_fails(engine: Engine, tmp_path: Path) -> None:
    path = tmp_path / "grants"
    _grant(engine, 1, "user", "bob")
    svc = service(engine, Crashing(cluster(), sent=0), SimClock(0.0), grants_file=path)
    with pytest.raises(Crash):
        svc.run_once()
    assert "1 user bob" in _lines(path)


def test_a_failed_write_does_not_fail_the_cycle(engine: Engine, tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    svc = service(engine, cluster(), SimClock(0.0), grants_file=blocker / "grants")
    with caplog.at_level(logging.ERROR, logger="railgang.daemon"):
        reports = [svc.run_once() for _ in range(3)]
    assert [r.error for r in reports] == [None] * 3 and not any(r.grants_written for r in reports)
    errors = [r for r in caplog.records if "class grants file" in r.getMessage()]
    assert len(errors) == 1 and "ledger.grants_file" in errors[0].getMessage()  # once, not per cycle


def test_no_path_no_file(engine: Engine, tmp_path: Path) -> None:
    svc = service(engine, cluster(), SimClock(0.0))
    assert svc.grants is None and not svc.run_once().grants_written


@pytest.mark.parametrize(("before", "written"), [
    (None, True), ("0 user a\n", False), ("1 user a\n", True), (b"\xff\xfe", True),
], ids=["missing", "same", "different", "not-text"])
def test_write_grants_file(tmp_path: Path, before: str | bytes | None, written: bool) -> None:
    path = tmp_path / "g"
    if isinstance(before, str):
        path.write_text(before)
    elif isinstance(before, bytes):
        path.write_bytes(before)
    assert write_if_changed(path, "0 user a\n") is written
    assert path.read_text() == "0 user a\n"
