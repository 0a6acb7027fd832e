"""Step timings in production: the sacct ingest stores the training helper's step and compute
times from a job's progress Comment, at most one row per job per interval, and a hostile
Comment costs only that job's timings (real ingest, SQLite and PostgreSQL)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from railgang.daemon.config import LedgerSettings
from railgang.daemon.ledger.ingest import ingest_window
from railgang.db.ledger import ProgressSample
from railgang.db.models import Job, UsageRecord
from railgang.db.session import session_scope
from railgang.db.steps import StepTiming
from tests.daemon.api.dbs import fresh_engine
from tests.daemon.ledger.builders import T0, document, record

CFG = LedgerSettings(step_timing_every_s=300)  # one row per job per 5 minutes


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    pg = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    with fresh_engine(request.param, tmp_path, pg) as eng:
        yield eng


def _running(job_id: int, comment: str) -> dict[str, object]:
    return record(job_id, "team-a", start=T0, end=0, submission=T0 - 5, gpus=8,
                  state="RUNNING", comment=comment)


def _ingest(engine: Engine, recs: list[dict[str, object]], until: int) -> int:
    return ingest_window(engine, lambda a, b: document(recs),
                         datetime.fromtimestamp(T0 - 60, UTC), datetime.fromtimestamp(until, UTC),
                         settings=CFG, cluster="railgang").step_timings


def _report(t: int, step: int, step_s: float = 2.0, compute_s: float = 0.8) -> str:
    return (f"rg-progress:step={step},sps=100.0,t={t},total=1000,step_s={step_s},"
            f"compute_s={compute_s}")


def test_one_row_per_job_per_interval(engine: Engine) -> None:
    base = T0 + 600  # on the 300 s grid's boundary, so the cases below are exact
    base -= base % 300
    for t, step in ((base + 10, 5), (base + 70, 35), (base + 290, 140), (base + 310, 150)):
        assert _ingest(engine, [_running(1, _report(t, step))], t + 5) == 1
    with session_scope(engine) as s:
        rows = s.execute(select(StepTiming.t_epoch, StepTiming.step_s, StepTiming.compute_s)
                         .order_by(StepTiming.t_epoch)).all()
        samples = s.scalar(select(ProgressSample.job_id).limit(1))
        assert s.scalar(select(UsageRecord.job_id).limit(1)) is not None
    assert [tuple(r) for r in rows] == [(base, 2.0, 0.8), (base + 300, 2.0, 0.8)]
    assert samples is not None  # the report is kept as a progress sample too


def test_old_or_hostile_comments_store_nothing_and_the_ingest_goes_on(
        engine: Engine, caplog: pytest.LogCaptureFixture) -> None:
    recs = [_running(1, "rg-progress:step=5,sps=1.0,t=1796000100"),  # old helper: no timings
            _running(2, "rg-progress:step=5,sps=1.0,t=1796000100,step_s=1,compute_s=9"),
            _running(3, "rg-progress:step=5,sps=nan,t=1796000100"),
            _running(4, "rg-labels:experiment=e1"),
            _running(5, _report(T0 + 100, 50, step_s=3.0, compute_s=1.0))]
    with caplog.at_level(logging.WARNING):
        assert _ingest(engine, recs, T0 + 200) == 1
    with session_scope(engine) as s:
        jobs = s.execute(select(Job.slurm_job_id).order_by(Job.slurm_job_id)).scalars().all()
        timed = s.execute(select(Job.slurm_job_id).join(StepTiming, StepTiming.job_id == Job.id)
                          ).scalars().all()
    assert jobs == ["1", "2", "3", "4", "5"] and timed == ["5"]
    lines = [r.getMessage() for r in caplog.records if "progress ignored" in r.getMessage()]
    assert len(lines) == 2 and all("\n" not in m for m in lines)
    assert any("job 2" in m and "compute_s" in m for m in lines)


def test_the_interval_is_a_ledger_setting(engine: Engine) -> None:
    base = T0 + 600 - (T0 + 600) % 300  # two reports 120 s apart inside one 300 s slot
    fine = LedgerSettings(step_timing_every_s=60)
    for t, step in ((base + 10, 5), (base + 130, 60)):
        ingest_window(engine, lambda a, b, t=t, step=step: document([_running(1, _report(t, step))]),
                      datetime.fromtimestamp(T0 - 60, UTC), datetime.fromtimestamp(t + 5, UTC),
                      settings=fine, cluster="railgang")
    with session_scope(engine) as s:
        slots = s.execute(select(StepTiming.t_epoch).order_by(StepTiming.t_epoch)).scalars().all()
    assert slots == [base, base + 120]  # the default 300 s grid would keep only the first
