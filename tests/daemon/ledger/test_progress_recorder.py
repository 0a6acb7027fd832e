"""The daemon's step-timing recorder: running jobs' progress Comments (as squeue shows them every
cycle) become ``step_timings`` rows, one per job per interval however often the daemon cycles;
pending jobs, old-style and hostile Comments write nothing (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from railgang.daemon.ledger.progress import StepTimingRecorder
from railgang.daemon.slurm.cli.records import SqueueJob, parse_squeue
from railgang.db.models import Job
from railgang.db.session import session_scope
from railgang.db.steps import StepTiming
from tests.daemon.api.dbs import fresh_engine
from tests.daemon.slurm.cli.capture import DATA

T = 1796057400


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    pg = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    with fresh_engine(request.param, tmp_path, pg) as eng:
        yield eng


def squeue(comments: dict[int, str]) -> list[SqueueJob]:
    """The captured 22.05 squeue read (9, 10 running; 11, 12 pending) with these Comments."""
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    for job in raw["jobs"]:
        job["comment"] = comments.get(job["job_id"], "")
    jobs, _ = parse_squeue(json.dumps(raw))
    return jobs


def report(t: int, step_s: float = 2.0, compute_s: float = 0.5) -> str:
    return f"rg-progress:step=10,sps=1.0,t={t},total=100,step_s={step_s},compute_s={compute_s}"


def test_one_row_per_job_per_interval_across_cycles(engine: Engine) -> None:
    rec = StepTimingRecorder("railgang", every_s=300)
    base = T - T % 300
    written = []
    for t in range(base, base + 900, 20):  # 45 cycles, a new report every 20 s
        with session_scope(engine) as s:
            written.append(rec.record(s, squeue({9: report(t), 11: report(t),  # 11 is pending
                                                 10: "rg-progress:step=1,sps=1,t=1"})))
    assert sum(written) == 3  # 900 s of reports: one row per 300 s, job 9 only
    with session_scope(engine) as s:
        rows = s.execute(select(Job.slurm_job_id, Job.account, StepTiming.t_epoch,
                                StepTiming.step_s, StepTiming.compute_s)
                         .join(Job, Job.id == StepTiming.job_id)
                         .order_by(StepTiming.t_epoch)).all()
    assert [tuple(r) for r in rows] == [("9", "team-a", base + k * 300, 2.0, 0.5)
                                        for k in range(3)]
    # a restarted daemon (empty memory) does not add a second row for the same slot
    with session_scope(engine) as s:
        StepTimingRecorder("railgang", every_s=300).record(s, squeue({9: report(base + 610)}))
        assert len(s.execute(select(StepTiming.t_epoch)).all()) == 3


def test_hostile_comments_write_nothing(engine: Engine) -> None:
    with session_scope(engine) as s:
        n = StepTimingRecorder("railgang").record(s, squeue({
            9: "rg-progress:step=1,sps=1,t=1,step_s=1,compute_s=5",
            10: "rg-progress:step=1,sps=1,t=1,step_s=1e9,compute_s=1"}))
        assert n == 0 and s.scalar(select(StepTiming.job_id)) is None
