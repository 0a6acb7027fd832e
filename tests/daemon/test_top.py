"""`railgang top` frames from real Slurm 22.05 output (the CLI backend's captured fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.cli.top import Frame, build_frame, from_daemon, leaves_of, render, select
from railgang.daemon.slurm.cli.records import parse_sinfo, parse_squeue, topology_from_show

DATA = Path(__file__).parent / "slurm" / "cli" / "data"


def frame() -> Frame:
    jobs, p1 = parse_squeue((DATA / "squeue_mixed.json").read_text())
    nodes, p2 = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    leaves = leaves_of(topology_from_show((DATA / "scontrol_topology.txt").read_text()))
    return build_frame(jobs, nodes, leaves, [*p1, *p2])


def test_leaves_come_from_the_topology() -> None:
    leaves = leaves_of(topology_from_show((DATA / "scontrol_topology.txt").read_text()))
    assert list(leaves) == ["leaf1", "leaf2", "leaf3", "leaf4"]
    assert leaves["leaf1"] == ["n01", "n02", "n03", "n04"]


def test_frame_counts_gpus_and_owners_per_index() -> None:
    f = frame()
    assert f.gpus_used == 8 + 8 + 4 + 2 + 2
    n01 = next(n for n in f.leaves["leaf1"] if n.name == "n01")
    assert n01.owners == ("9",) * 8
    n05 = next(n for n in f.leaves["leaf2"] if n.name == "n05")
    assert n05.owners[:4] == ("10",) * 4 and n05.owners[4:] == ("",) * 4


def test_frame_lists_live_jobs_only_running_first() -> None:
    f = frame()
    ids = [j.job_id for j in f.jobs]
    assert "6" not in ids and "7" not in ids  # cancelled: history, not the queue
    running = [j for j in f.jobs if j.state == "RUNNING"]
    assert ids[: len(running)] == [j.job_id for j in running]
    gang = next(j for j in f.jobs if j.job_id == "9")
    assert gang.shape == "tp8 dp2" and gang.priority_class == 1 and gang.leaves == 1
    plain = next(j for j in f.jobs if j.job_id == "8")
    assert plain.shape == "" and plain.priority_class is None


def test_a_malformed_tag_is_reported_not_fatal() -> None:
    f = frame()
    assert any("13" in p for p in f.problems) or any(j.job_id == "13" for j in f.jobs)


def test_render_shows_every_leaf_and_job() -> None:
    console = Console(width=160, record=True)
    console.print(render(frame()))
    text = console.export_text()
    for leaf in ("leaf1", "leaf2", "leaf3", "leaf4"):
        assert leaf in text
    assert "GPUs in use 24/" in text
    assert "tp8 dp2" in text


def test_the_daemons_reason_replaces_slurms() -> None:
    jobs, _ = parse_squeue((DATA / "squeue_mixed.json").read_text())
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    f = build_frame(jobs, nodes, {}, reasons={"12": "waiting_for_gpus"})
    assert next(j for j in f.jobs if j.job_id == "12").reason == "waiting_for_gpus"
    assert next(j for j in f.jobs if j.job_id == "11").reason != "waiting_for_gpus"


def test_daemon_reasons_from_its_database(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from railgang.daemon.cli.top import daemon_reasons
    from railgang.db.migrate import upgrade
    from railgang.db.repositories.explanations import ExplanationRow, upsert
    from railgang.db.session import make_engine, session_scope

    url = f"sqlite:///{tmp_path / 'rg.sqlite'}"
    assert daemon_reasons(url) == {}  # no tables yet: the view still works
    upgrade(url)
    with session_scope(make_engine(url)) as s:
        upsert(s, [ExplanationRow("12", "waiting", "team-a", 3, 6, reason="quarantined"),
                   ExplanationRow("9", "running", "team-a", 1, 16, nodes="n[01-02]")],
               cycle_id=1, at=datetime.now(UTC))
    assert daemon_reasons(url) == {"12": "quarantined"}


# -- squeue-like filters, columns, and the daemon's view (any backend) ---------------------------
def test_select_by_account_and_user() -> None:
    f = frame()
    b = select(f, accounts=["team-b"])
    assert [j.job_id for j in b.jobs] == ["10", "12"]
    assert b.leaves == f.leaves and b.gpus_used == f.gpus_used  # the grid is the whole cluster
    assert select(f, users=["root"]).jobs == f.jobs
    assert select(f, users=["nobody"]).jobs == []


def test_render_with_chosen_columns_marks_filtered_gpus() -> None:
    console = Console(width=160, record=True)
    console.print(render(select(frame(), accounts=["team-b"]), ["job", "account"]))
    text = console.export_text()
    assert "team-b" in text and "team-a" not in text and "shape" not in text
    assert "▪" in text  # team-a's GPUs: busy, not listed


def _daemon_db(tmp_path: Path) -> str:
    from datetime import UTC, datetime

    from railgang.db import migrate
    from railgang.db.repositories.explanations import ExplanationRow, upsert
    from railgang.db.session import make_engine, session_scope

    url = f"sqlite:///{tmp_path / 'rg.sqlite'}"
    migrate.upgrade(url)
    with session_scope(make_engine(url)) as s:
        upsert(s, [ExplanationRow("5", "running", "team-a", 1, 16, nodes="n[01-02]"),
                   ExplanationRow("6", "waiting", "team-b", 3, 8, reason="quota")],
               cycle_id=1, at=datetime.now(UTC))
    return url


def test_from_daemon_reads_the_explanations(tmp_path: Path) -> None:
    f = from_daemon(_daemon_db(tmp_path))
    assert [(j.job_id, j.state, j.nodes, j.reason) for j in f.jobs] == [
        ("5", "RUNNING", ("n01", "n02"), ""), ("6", "PENDING", (), "quota")]
    assert f.gpus_used == 16 and f.leaves == {} and f.problems


def test_top_on_a_simulator_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _daemon_db(tmp_path)
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setenv("RAILGANG_DB__URL", url)
    monkeypatch.setenv("RAILGANG_SLURM__BACKEND", "sim")
    res = CliRunner().invoke(app, ["top", "--json", "-A", "team-b"])
    assert res.exit_code == 0, res.output
    assert [j["job_id"] for j in json.loads(res.output)["jobs"]] == ["6"]
    res = CliRunner().invoke(app, ["top", "--once", "--format", "job,reason"])
    assert res.exit_code == 0 and "quota" in res.output, res.output


def test_unknown_column_is_a_usage_error() -> None:
    res = CliRunner().invoke(app, ["top", "--format", "job,colour"])
    assert res.exit_code == 2 and "colour" in res.output
