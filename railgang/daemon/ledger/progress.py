"""Step timings from running jobs, as the daemon observes them every cycle.

The training helper rewrites its job's ``Comment`` with a progress report
(``rg-progress:...,step_s=…,compute_s=…``); ``squeue --json`` shows the latest one on every
cycle, while ``sacct`` (slurmdbd) learns a Comment only when the job record is sent, at its end.
So the daemon, not the sacct ingest, keeps the samples of running jobs: after each cycle
:class:`StepTimingRecorder` stores one ``step_timings`` row per job per ``every_s`` (the report's
time rounded down to that grid; the row already there wins), which the report's
communication-bound detector reads. Rows key on the ledger's job row, created here if the ingest
has not seen the job yet (the ingest later fills in the rest).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from railgang.daemon.ledger.telemetry import STEP_TIMING_EVERY_S, store_step_timing
from railgang.daemon.slurm.cli.records import SqueueJob
from railgang.db.models import Job
from railgang.db.repositories.ledger import dialect_insert, job_of


def ensure_job(s: Session, cluster: str, rec: SqueueJob) -> int:
    """The ledger's row id of the job, adding a minimal row if the ingest has not written it.

    Slurm reuses job ids: the row is the job of that id submitted at or before squeue's
    submit time and not ended by then (``ledger.job_of``); a new one is keyed by that time."""
    pk = job_of(s, cluster, rec.job_id, rec.submit_time)
    if pk is not None:
        return pk
    submit = int(rec.submit_time)
    stmt = dialect_insert(s, Job.__table__).on_conflict_do_nothing(
        index_elements=["cluster", "slurm_job_id", "submit_epoch"])
    s.execute(stmt, [{"cluster": cluster, "slurm_job_id": rec.job_id, "submit_epoch": submit,
                      "account": rec.account, "user": rec.user, "gpus": rec.gpus_requested,
                      "priority_class": 3, "hints": "",
                      "submitted_at": datetime.fromtimestamp(rec.submit_time, UTC),
                      "state": rec.state}])
    pk = s.scalar(select(Job.id).where(Job.cluster == cluster, Job.slurm_job_id == rec.job_id,
                                       Job.submit_epoch == submit))
    assert pk is not None  # inserted just now or already there
    return pk


class StepTimingRecorder:
    """Keeps running jobs' step/compute times, at most one row per job per ``every_s``."""

    def __init__(self, cluster: str, *, every_s: int = STEP_TIMING_EVERY_S) -> None:
        self.cluster, self.every_s = cluster, max(1, every_s)
        self._slot: dict[str, int] = {}  # job -> grid slot last written (skips the database)

    def record(self, s: Session, jobs: Iterable[SqueueJob]) -> int:
        """Store the new samples among ``jobs`` (one squeue read); returns how many."""
        written, seen = 0, set()
        for rec in jobs:
            p = rec.progress
            if rec.state != "RUNNING" or p is None or p.step_s is None or p.compute_s is None:
                continue
            seen.add(rec.job_id)
            slot = p.t - p.t % self.every_s
            if self._slot.get(rec.job_id) == slot:
                continue
            written += store_step_timing(s, ensure_job(s, self.cluster, rec), p,
                                         every_s=self.every_s)
            self._slot[rec.job_id] = slot
        self._slot = {j: v for j, v in self._slot.items() if j in seen}
        return written


__all__ = ["StepTimingRecorder", "ensure_job"]
