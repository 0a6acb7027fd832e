"""``railgang sim --ledger``: the estimate printed before anything is written equals what is
written, a large run asks (``--yes`` skips; no terminal refuses in one line, nothing written),
every node of the fleet is in the inventory, and a day's samples are read through the index."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select, text
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.sim import ledger_run
from railgang.db.ledger import GpuSample, NodeState
from railgang.errors import InputError
from tests.daemon.api.conftest import db_kind, engine  # noqa: F401 (fixtures: SQLite + PostgreSQL)

TRACE = "job_id,submit_time,gpus,duration_s,account\n" + "".join(
    f"j{i},{i * 1800},{1 + i % 4},{3600 + 600 * i},{'ab'[i % 2]}\n" for i in range(6))
ARGS = ("--nodes", "2", "--gpus-per-node", "4", "--leaf", "2", "-q",
        "--telemetry-interval-s", "300")


def sim(tmp_path: Path, *extra: str) -> tuple[int, str, BaseException | None, str]:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    res = CliRunner().invoke(app, ["sim", "--trace", str(trace), *ARGS, "--ledger", url,
                                   *extra])
    return res.exit_code, res.output, res.exception, url


def count(url: str, model: type) -> int:
    eng = create_engine(url)
    with eng.connect() as c:
        n = int(c.scalar(select(func.count()).select_from(model)) or 0)
    eng.dispose()
    return n


def test_estimate_is_what_is_written(tmp_path: Path) -> None:
    code, out, exc, url = sim(tmp_path)
    assert code == 0, (out, exc)
    line = next(x for x in out.splitlines() if "GPU samples (" in x)
    estimated = int(line.split("-> ")[1].split(" GPU")[0].replace(",", ""))
    assert estimated == count(url, GpuSample) > 0
    assert "8 GPUs every 300 s" in line and "in SQLite" in line
    assert count(url, NodeState) == 2  # every node, busy or not


def test_large_run_without_a_terminal_refuses(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_run, "CONFIRM_SAMPLES", 10)
    code, _, exc, url = sim(tmp_path)
    assert code == 1 and isinstance(exc, InputError)
    assert "pass --yes" in str(exc) and "\n" not in str(exc)
    assert count(url, GpuSample) == 0  # nothing written


def test_yes_skips_the_question(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_run, "CONFIRM_SAMPLES", 10)
    code, out, exc, url = sim(tmp_path, "--yes")
    assert code == 0, (out, exc)
    assert count(url, GpuSample) > 10


def test_a_person_can_say_no(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from railgang.daemon.core.policies.registry import get
    from railgang.daemon.sim.engine import EngineConfig
    from railgang.daemon.sim.ledger_cli import write_sim_ledger
    from railgang.daemon.sim.traces.model import TraceJob
    from railgang.topology.fabric import fabric_from_shape

    monkeypatch.setattr(ledger_run, "CONFIRM_SAMPLES", 10)
    monkeypatch.setattr("typer.confirm", lambda *a, **k: False)
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    got = write_sim_ledger(Console(file=io.StringIO()), url,
                           [TraceJob("x", 0.0, 2, 7200.0)], get("default"),
                           fabric_from_shape(1, 4, 1), EngineConfig(), start=None,
                           interval_s=60, seed=0, yes=False, quiet=True, interactive=True)
    assert got is None and count(url, GpuSample) == 0


def test_a_day_of_samples_is_read_through_the_index(tmp_path: Path) -> None:
    code, _, _, url = sim(tmp_path)
    assert code == 0
    eng = create_engine(url)
    with eng.connect() as c:
        plan = " ".join(str(r) for r in c.execute(text(
            "EXPLAIN QUERY PLAN SELECT node, gpu, at_epoch_ms FROM gpu_samples "
            "WHERE at_epoch_ms >= 1 AND at_epoch_ms < 2")))
    eng.dispose()
    assert "ix_gpu_samples_at_epoch_ms" in plan


def test_samples_stored_on_both_databases(engine) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """The driver-level insert of the samples works on SQLite and PostgreSQL alike."""
    from railgang.daemon.core.policies.registry import get
    from railgang.daemon.sim.telemetry import TelemetryConfig, simulate_with_ledger, write_ledger
    from railgang.daemon.sim.traces.model import TraceJob
    from railgang.topology.fabric import fabric_from_shape

    fabric = fabric_from_shape(1, 4, 1)
    jobs = [TraceJob("x", 0.0, 2, 3600.0, account="a")]
    result, segments, tiers = simulate_with_ledger(jobs, get("default"), fabric)
    seen: list[tuple[int, int]] = []
    stats = write_ledger(engine, jobs, result, segments, fabric,
                         TelemetryConfig(interval_s=60), node_tier=tiers,
                         on_progress=lambda done, total: seen.append((done, total)))
    with engine.connect() as c:
        n = c.scalar(select(func.count()).select_from(GpuSample))
        busy = c.scalar(select(func.count()).select_from(GpuSample)
                        .where(GpuSample.sm_util > 50))
    assert n == stats.samples == 4 * 61 and seen[-1] == (n, n)  # 0..3600 s every 60 s
    assert busy and busy > 80  # the job's two GPUs, most of the hour
