"""``railgang ledger|quota|token`` end to end on a SQLite database, with the real sacct capture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import delete, select
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.db.models import Job, UsageRecord
from railgang.db.session import make_engine, session_scope
from railgang.errors import DatabaseError, ValidationFailed
from tests.daemon.ledger.test_telemetry import _read

DATA = Path(__file__).parent / "data"
WINDOW = ["--since", "2026-11-30T10:00:00", "--until", "2026-11-30T18:00:00"]
SACCT = ["--file", str(DATA / "sacct_22.05_window.json")]


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    monkeypatch.setenv("RAILGANG_DB__URL", url)
    monkeypatch.setenv("RAILGANG_LEDGER__WINDOW_S", "7200")
    assert CliRunner().invoke(app, ["db", "upgrade"]).exit_code == 0
    return url


def run(*args: str) -> tuple[int, str, BaseException | None]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output, res.exception


def _segments(url: str) -> list[tuple[str, int, int | None, int]]:
    eng = make_engine(url)
    with session_scope(eng) as s:
        rows = s.execute(select(Job.slurm_job_id, UsageRecord.start_epoch, UsageRecord.end_epoch,
                                UsageRecord.gpus).join(Job, Job.id == UsageRecord.job_id)
                         .order_by(Job.slurm_job_id, UsageRecord.start_epoch)).all()
    eng.dispose()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_ingest_twice_then_reconcile(db: str) -> None:
    code, out, _ = run("ledger", "ingest", *WINDOW, *SACCT, "--json")
    assert code == 0, out
    first = json.loads(out)
    assert (first["windows"], first["segments"]) == (4, 32)  # 8 segments, read by 4 windows
    assert first["watermark"].startswith("2026-11-30T18:00:00")
    rows = _segments(db)
    assert len(rows) == 8
    assert run("ledger", "ingest", *WINDOW, *SACCT)[0] == 0
    assert _segments(db) == rows  # same window again: nothing changes
    code, out, _ = run("ledger", "reconcile", *WINDOW, *SACCT, "--json")
    rep = json.loads(out)
    assert code == 0 and rep["clean"] and rep["differences"] == []
    assert rep["sacct_gpu_seconds"] == rep["ledger_gpu_seconds"]
    # lose one segment: reconcile lists it and exits 3
    eng = make_engine(db)
    with session_scope(eng) as s:
        s.execute(delete(UsageRecord).where(UsageRecord.gpus == 32))
    eng.dispose()
    code, out, _ = run("ledger", "reconcile", *WINDOW, *SACCT)
    assert code == 3
    assert "missing  railgang/2 start=1796057735: 32 GPUs from 1796057735 not in the ledger" in out
    assert "1 difference(s)" in out
    assert run("ledger", "watermark")[1].startswith("2026-11-30T18:00:00")


def test_telemetry_command(db: str) -> None:
    assert run("ledger", "ingest", *WINDOW, *SACCT)[0] == 0
    csv = Path(db.removeprefix("sqlite:///")).parent / "smi.csv"
    csv.write_text(_read("nvidia-smi-query-500ms.csv"))
    code, out, _ = run("ledger", "telemetry", str(csv), "--format", "nvidia-smi", "--node", "n01")
    assert code == 0 and out.startswith("216 sample(s); 0 segment(s)")  # recorded another day
    code, _, exc = run("ledger", "telemetry", str(csv), "--format", "nvidia-smi")
    assert code == 1 and "--node is required" in str(exc)


def test_quota_and_token_admin_flow(db: str, tmp_path: Path) -> None:
    assert run("quota", "add", "ml", "--level", "org", "--guaranteed", "64")[0] == 0
    assert run("quota", "add", "research", "--level", "dept", "--parent", "ml",
               "--guaranteed", "32", "--burst-limit", "48")[0] == 0
    assert run("quota", "add", "team-a", "--level", "team", "--parent", "research",
               "--guaranteed", "24")[0] == 0
    code, _, exc = run("quota", "add", "team-b", "--level", "team", "--parent", "research",
                       "--guaranteed", "9")
    assert code == 1 and isinstance(exc, ValidationFailed)
    assert "research.guaranteed_gpus: children are guaranteed 33 together" in str(exc)
    assert run("quota", "set", "team-a", "--guaranteed", "16", "--burst-limit", "40")[0] == 0
    code, out, _ = run("quota", "tree")
    assert out.splitlines() == ["ml (org) guaranteed 64 limit -",
                                "  research (dept) guaranteed 32 limit 48",
                                "    team-a (team) guaranteed 16 limit 40"]
    assert run("ledger", "ingest", *WINDOW, *SACCT)[0] == 0
    code, out, _ = run("quota", "effective", "team-a", "--json")
    eq = json.loads(out)
    assert (eq["allocated"], eq["q_eff"], eq["binding"]) == (16, 40, "team-a")  # job 5 runs
    assert run("quota", "grant", "1", "user", "alice")[0] == 0
    grants = tmp_path / "grants.txt"
    assert run("quota", "grants-file", str(grants))[1].strip().endswith("written")
    assert "1 user alice" in grants.read_text().splitlines()
    assert run("quota", "grants-file", str(grants))[1].strip().endswith("unchanged")
    assert run("quota", "rate", "gpu", "reserved", "2.5")[0] == 0
    code, out, _ = run("token", "create", "ci", "--role", "team-reader", "--team", "team-a",
                       "--json")
    assert code == 0 and json.loads(out)["token"].startswith("rg_")
    assert run("token", "revoke", "ci")[0] == 0
    code, out, _ = run("token", "list", "--json")
    assert [(t["name"], t["revoked"], t["teams"]) for t in json.loads(out)] == [
        ("ci", True, ["team-a"])]


def test_unmigrated_database_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILGANG_DB__URL", f"sqlite:///{tmp_path / 'empty.sqlite'}")
    code, _, exc = run("token", "list")
    assert code == 1 and isinstance(exc, DatabaseError) and "railgang db upgrade" in str(exc)
