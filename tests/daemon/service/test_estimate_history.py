"""The estimator's run-time history survives a restart: the sacct ingest keeps each finished
job's time limit and last run, and a new daemon's estimator is seeded from them (SQLite and
PostgreSQL, through the real ingest and migrations)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from railgang.daemon.config import LedgerSettings
from railgang.daemon.core.model.job import Job as CoreJob
from railgang.daemon.core.model.job import JobRequest
from railgang.daemon.ledger.ingest import ingest_window
from railgang.daemon.service.estimate import RatioHistory, StartEstimator, run_time
from railgang.daemon.service.estimate_history import finished_ratios, with_ledger_history
from railgang.db.models import Job
from railgang.db.session import session_scope
from tests.daemon.api.dbs import fresh_engine
from tests.daemon.ledger.builders import T0, document, record

CFG = LedgerSettings()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    pg = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    with fresh_engine(request.param, tmp_path, pg) as eng:
        yield eng


def _rec(job_id: int, account: str, start: int, end: int, state: str,
         limit_min: int | None, **kw: Any) -> dict[str, Any]:
    r = record(job_id, account, start=start, end=end, submission=start - 5, gpus=8,
               state=state, **kw)
    r["time"]["limit"] = limit_min
    return r


def _ingest(engine: Engine, recs: list[dict[str, Any]], since: int, until: int) -> int:
    res = ingest_window(engine, lambda a, b: document(recs), datetime.fromtimestamp(since, UTC),
                        datetime.fromtimestamp(until, UTC), settings=CFG, cluster="railgang")
    return res.step_timings


def test_finished_jobs_keep_limit_and_run_and_seed_a_new_estimator(engine: Engine) -> None:
    recs = [_rec(1, "team-a", T0, T0 + 1800, "COMPLETED", 60),  # 0.5 of its hour
            _rec(2, "team-a", T0, T0 + 900, "FAILED", 60),  # 0.25
            _rec(3, "team-a", T0, T0 + 3600, "TIMEOUT", 60),  # 1.0
            _rec(4, "team-b", T0, T0 + 600, "CANCELLED", None),  # unlimited: no ratio
            _rec(5, "team-a", T0, 0, "RUNNING", 60),  # not finished
            # requeued once: the first run is not the job's run time, the last one is
            _rec(6, "team-a", T0, T0 + 100, "REQUEUED", 30),
            _rec(6, "team-a", T0 + 200, T0 + 200 + 720, "COMPLETED", 30)]  # 0.4
    _ingest(engine, recs, T0 - 60, T0 + 4000)
    # an older window that sees only job 6's first run must not erase its end
    _ingest(engine, recs[5:6], T0 - 60, T0 + 150)
    with session_scope(engine) as s:
        got = {j: r for j, r in s.execute(select(Job.slurm_job_id, Job.run_s))}
        ratios = finished_ratios(s, cluster="railgang", limit=100)
    assert got == {"1": 1800, "2": 900, "3": 3600, "4": 600, "5": None, "6": 720}
    assert sorted(r for _, r in ratios) == pytest.approx([0.25, 0.4, 0.5, 1.0])

    # a restarted daemon: a fresh estimator, seeded from the ledger before its first cycle
    est = with_ledger_history(StartEstimator("fifo", history=RatioHistory(min_samples=3)),
                              engine, cluster="railgang")
    assert est is not None
    ratios_a, scope = est.history.ratios("team-a", 2)
    assert scope == "account" and sorted(ratios_a) == pytest.approx([0.25, 0.4, 0.5, 1.0])
    job = CoreJob(JobRequest(job_id="9", gpus=8, account="team-a", submit_time=0.0,
                             time_limit_s=3600.0))
    left, source = run_time(job, 0.0, est.history, lambda v: sorted(v)[len(v) // 2])
    assert source == "history" and left == pytest.approx(0.5 * 3600)
    fresh, _ = run_time(job, 0.0, RatioHistory(min_samples=3), min)
    assert fresh == 3600.0  # without the ledger: the time limit alone


def test_unreadable_ledger_costs_only_the_history(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    from railgang.db.session import make_engine
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.sqlite'}")  # never migrated: no tables
    with caplog.at_level(logging.WARNING):
        est = with_ledger_history(StartEstimator("fifo"), engine, cluster="railgang")
    engine.dispose()
    assert est is not None and est.history.ratios("team-a", 3) == ((), "")
    assert any("cannot read run-time history" in r.getMessage() for r in caplog.records)
