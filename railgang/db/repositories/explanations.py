"""Per-job explanations: the latest reason (waiting) or placement (running) the core gave a job.

One row per job keeps the table bounded by the jobs the cluster knows; a job that leaves the
queue is marked ``gone`` and dropped after a retention time. The daemon writes only the rows that
changed since its previous cycle, so a steady queue costs no writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from railgang.db.models import JobExplanation
from railgang.db.repositories.ledger import dialect_insert

_CHUNK = 500  # ids per IN (...) list, well under every backend's bound-parameter limit


@dataclass(frozen=True, slots=True)
class ExplanationRow:
    job_id: str
    state: str  # waiting | running
    account: str
    priority_class: int
    gpus: int
    reason: str | None = None
    detail: str = ""
    position: int | None = None
    queue_length: int | None = None
    nodes: str = ""
    data: str = "{}"  # canonical JSON
    # what the row says apart from the figures that drift with other jobs (position, the jobs
    # ahead, free GPUs, the account's fair share, the start estimate); not stored: the daemon's
    # explain.Tracker refreshes a row whose steady part is unchanged only now and then.
    # "" for a row whose every change is written at once
    steady: str = field(default="", compare=False)


def upsert(s: Session, rows: Sequence[ExplanationRow], *, cycle_id: int, at: datetime) -> None:
    """Insert or overwrite the rows for these jobs: one ``INSERT ... ON CONFLICT DO UPDATE``
    sent as an executemany per 500 rows, not one ORM object per job (at 10,000 waiting jobs
    whose positions all moved, the ORM's load-then-update took 3-6 s a cycle; BENCHMARKS.md)."""
    by_id = {r.job_id: r for r in rows}
    if not by_id:
        return
    table = JobExplanation.__table__
    values = [{"job_id": job_id, "cycle_id": cycle_id, "updated_at": at, "state": r.state,
               "account": r.account, "priority_class": r.priority_class, "gpus": r.gpus,
               "reason": r.reason, "detail": r.detail[:512], "position": r.position,
               "queue_length": r.queue_length, "nodes": r.nodes[:1024], "data": r.data}
              for job_id, r in by_id.items()]
    for i in range(0, len(values), _CHUNK):
        stmt = dialect_insert(s, table)
        stmt = stmt.on_conflict_do_update(
            index_elements=[table.c.job_id],
            set_={c.name: stmt.excluded[c.name] for c in table.columns if c.name != "job_id"})
        s.execute(stmt, values[i:i + _CHUNK])


def mark_gone(s: Session, job_ids: Iterable[str], *, cycle_id: int, at: datetime) -> None:
    keys = list(job_ids)
    for i in range(0, len(keys), _CHUNK):
        s.execute(update(JobExplanation).where(JobExplanation.job_id.in_(keys[i:i + _CHUNK]))
                  .values(state="gone", cycle_id=cycle_id, updated_at=at))


def drop_gone(s: Session, *, before: datetime) -> None:
    s.execute(delete(JobExplanation).where(JobExplanation.state == "gone",
                                           JobExplanation.updated_at < before))


def live(s: Session) -> dict[str, tuple[str, str]]:
    """``job -> (state, nodes)`` of jobs not marked gone (a restarted daemon tracks changes
    from these)."""
    q = select(JobExplanation.job_id, JobExplanation.state, JobExplanation.nodes).where(
        JobExplanation.state != "gone")
    return {j: (state, nodes) for j, state, nodes in s.execute(q)}


def waiting_reasons(s: Session) -> dict[str, str]:
    """``job -> reason`` of every job the core left waiting in its latest cycle."""
    q = select(JobExplanation.job_id, JobExplanation.reason).where(
        JobExplanation.state == "waiting")
    return {j: reason or "" for j, reason in s.execute(q)}


def with_reasons(s: Session, reasons: Sequence[str], *, limit: int = 20,
                 ) -> tuple[int, list[JobExplanation]]:
    """(how many waiting jobs have one of ``reasons``, the latest ``limit`` of them)."""
    where = (JobExplanation.state == "waiting", JobExplanation.reason.in_(list(reasons)))
    total = s.scalar(select(func.count()).select_from(JobExplanation).where(*where)) or 0
    rows = s.scalars(select(JobExplanation).where(*where)
                     .order_by(JobExplanation.updated_at.desc(), JobExplanation.job_id)
                     .limit(limit))
    return total, list(rows)


def get(s: Session, job_id: str) -> JobExplanation | None:
    return s.get(JobExplanation, job_id)


__all__ = ["ExplanationRow", "drop_gone", "get", "live", "mark_gone", "upsert",
           "waiting_reasons", "with_reasons"]
