"""Slurm reuses job ids (the id wraps at MaxJobId, or slurmctld's state is reset): two jobs of
one id are two ledger jobs, told apart by their submit time (issue 18 row 14, migration 0008),
whatever order the windows come in; a requeued or resized job stays one job."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import Engine, select

from railgang.daemon.config import LedgerSettings
from railgang.daemon.ledger.ingest import ingest_window
from railgang.daemon.ledger.progress import ensure_job
from railgang.db.models import Job, UsageRecord
from railgang.db.session import session_scope
from tests.daemon.api.dbs import fresh_engine
from tests.daemon.ledger.builders import T0, Piece, SJob, document, record

CFG = LedgerSettings()
# job 42 ran in the morning and completed; after an id wrap a second job 42 (another account)
# was submitted in the afternoon and is still running
FIRST = record(42, "team-a", start=T0 + 100, end=T0 + 400, submission=T0 + 90, gpus=8,
               state="COMPLETED", comment="rg-labels:experiment=old")
SECOND = record(42, "team-b", start=T0 + 1000, end=0, submission=T0 + 950, gpus=2,
                state="RUNNING", comment="rg-labels:experiment=new")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    pg = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    with fresh_engine(request.param, tmp_path, pg) as eng:
        yield eng


def ingest(engine: Engine, *records: dict[str, object], since: int = T0,
           until: int = T0 + 2000) -> None:
    ingest_window(engine, lambda a, b: document(list(records)), datetime.fromtimestamp(since, UTC),
                  datetime.fromtimestamp(until, UTC), settings=CFG, cluster="railgang")


def jobs(engine: Engine) -> list[tuple[str, int, str, list[tuple[int, int | None, int]]]]:
    with session_scope(engine) as s:
        out = []
        for job in s.scalars(select(Job).order_by(Job.slurm_job_id, Job.submit_epoch)):
            segs = s.execute(select(UsageRecord.start_epoch, UsageRecord.end_epoch, UsageRecord.gpus)
                             .where(UsageRecord.job_id == job.id)
                             .order_by(UsageRecord.start_epoch)).all()
            out.append((job.slurm_job_id, job.submit_epoch, job.account,
                        [tuple(r) for r in segs]))
    return out  # type: ignore[return-value]


WANT = [("42", T0 + 90, "team-a", [(T0 + 100, T0 + 400, 8)]),
        ("42", T0 + 950, "team-b", [(T0 + 1000, None, 2)])]


@pytest.mark.parametrize("order", ["one-window", "first-then-second", "second-then-first"])
def test_two_jobs_of_one_id_stay_apart(engine: Engine, order: str) -> None:
    batches = {"one-window": [[FIRST, SECOND]], "first-then-second": [[FIRST], [SECOND]],
               "second-then-first": [[SECOND], [FIRST]]}[order]
    for batch in batches:
        ingest(engine, *batch)
    assert jobs(engine) == WANT
    ingest(engine, FIRST, SECOND)  # the whole window again changes nothing
    assert jobs(engine) == WANT


def test_a_requeued_and_a_resized_job_stay_one_job_in_any_window_order(engine: Engine) -> None:
    requeued = SJob(7, "team-a", "requeue", (Piece(T0, T0 + 50, 8), Piece(T0 + 80, T0 + 120, 8)))
    resized = SJob(8, "team-a", "resize", (Piece(T0, T0 + 30, 8), Piece(T0 + 30, T0 + 60, 4),
                                           Piece(T0 + 60, T0 + 90, 2)))
    recs = [*requeued.records(), *resized.records()]
    for perm in list(itertools.permutations(range(len(recs))))[::8]:  # 15 of the 120 orders
        with session_scope(engine) as s:
            s.execute(UsageRecord.__table__.delete())
            s.execute(Job.__table__.delete())
        for i in perm:
            ingest(engine, recs[i])
        got = jobs(engine)
        assert [(j, sub, len(segs)) for j, sub, _, segs in got] == [("7", T0 - 5, 2),
                                                                   ("8", T0 - 5, 3)], perm


def test_the_daemons_row_for_a_running_job_is_the_second_job(engine: Engine) -> None:
    ingest(engine, FIRST)
    running = SimpleNamespace(job_id="42", account="team-b", user="bob", gpus_requested=2,
                              submit_time=float(T0 + 950), state="RUNNING")
    with session_scope(engine) as s:
        pk = ensure_job(s, "railgang", running)  # type: ignore[arg-type]
        first_pk = s.scalar(select(Job.id).where(Job.submit_epoch == T0 + 90))
    assert pk != first_pk
    ingest(engine, FIRST, SECOND)
    assert jobs(engine) == WANT
    with session_scope(engine) as s:
        assert ensure_job(s, "railgang", running) == pk  # type: ignore[arg-type]
