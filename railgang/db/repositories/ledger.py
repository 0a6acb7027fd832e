"""The usage ledger: idempotent upserts of segments, the ingest watermark, and usage/chargeback
aggregated in SQL (one GROUP BY, no Python loop over rows).

Exactly once: a segment's key is (job, start) with a unique constraint, and a job is (cluster,
job id, submit time) since Slurm reuses ids (issue 18 row 14); writing it again updates
the row (end, size, nodes) instead of adding one, so the same window ingested twice, overlapping
windows, or a window re-run after a crash leave the same rows. The watermark is written in the
same transaction as the segments it covers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, case, delete, func, literal, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, aliased

from railgang.db.ledger import JobLabel, LedgerWatermark
from railgang.db.models import Account, Job, UsageRecord
from railgang.db.org import Rate
from railgang.db.segments import Segment
from railgang.errors import ValidationFailed

_CHUNK = 500
DIMENSIONS = ("team", "department", "user", "gpu_type", "capacity", "tier", "job", "label")


def dialect_insert(s: Session, table: Any) -> Any:
    dialect = s.get_bind().dialect.name
    return (postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table))


def _ts(epoch: int | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def upsert_segments(s: Session, segments: Sequence[Segment], *,
                    capacity_of: Callable[[Segment], str], source: str = "sacct") -> int:
    """Write the segments (and their jobs and labels); returns how many were given.

    A job is (cluster, job id, submit time of its first record): Slurm reuses ids, so each
    segment goes to the job of that id that was submitted last before it and had not ended
    when it was submitted (:func:`assign_jobs`)."""
    if not segments:
        return 0
    gen = assign_jobs(s, segments)
    last: dict[tuple[str, str, int], Segment] = {}
    for i in sorted(range(len(segments)), key=lambda k: segments[k].key):
        seg = segments[i]
        last[(seg.cluster, seg.job_id, gen[i])] = seg
    job_rows = [{"cluster": c, "slurm_job_id": j, "submit_epoch": sub, "account": g.account,
                 "user": g.user, "gpus": g.gpus, "priority_class": 3, "hints": "",
                 "submitted_at": _ts(g.start), "state": g.state, **_run(g)}
                for (c, j, sub), g in last.items()]
    ids: dict[tuple[str, str, int], int] = {}
    for i in range(0, len(job_rows), _CHUNK):
        chunk = job_rows[i:i + _CHUNK]
        stmt = dialect_insert(s, Job.__table__)
        stmt = stmt.on_conflict_do_update(
            index_elements=["cluster", "slurm_job_id", "submit_epoch"],
            set_={"account": stmt.excluded.account, "user": stmt.excluded.user,
                  "gpus": stmt.excluded.gpus, "state": stmt.excluded.state,
                  # a window that does not reach the job's end must not erase what one did
                  **{k: func.coalesce(stmt.excluded[k], Job.__table__.c[k])
                     for k in ("time_limit_s", "run_s", "ended_epoch")}})
        s.execute(stmt, chunk)
        keys = [r["slurm_job_id"] for r in chunk]
        for c, j, sub, pk in s.execute(select(Job.cluster, Job.slurm_job_id, Job.submit_epoch,
                                              Job.id).where(Job.slurm_job_id.in_(keys))):
            if (c, j, sub) in last:
                ids[(c, j, sub)] = pk
    seg_rows = [{"job_id": ids[(g.cluster, g.job_id, gen[n])], "segment": 0, "account": g.account,
                 "user": g.user, "gpu_type": g.gpu_type, "gpus": g.gpus, "nodes": g.nodes[:1024],
                 "started_at": _ts(g.start), "ended_at": _ts(g.end), "start_epoch": g.start,
                 "end_epoch": g.end, "tier": "guaranteed", "capacity": capacity_of(g),
                 "gpu_ids": "", "source": source} for n, g in enumerate(segments)]
    for i in range(0, len(seg_rows), _CHUNK):
        stmt = dialect_insert(s, UsageRecord.__table__)
        ex = stmt.excluded
        stmt = stmt.on_conflict_do_update(
            index_elements=["job_id", "start_epoch"],
            set_={"account": ex.account, "user": ex.user, "gpu_type": ex.gpu_type,
                  "gpus": ex.gpus, "nodes": ex.nodes, "ended_at": ex.ended_at,
                  "end_epoch": ex.end_epoch, "capacity": ex.capacity})
        s.execute(stmt, seg_rows[i:i + _CHUNK])
    label_rows = [{"job_id": ids[k], "key": key, "value": value}
                  for k, g in last.items() for key, value in g.labels]
    for i in range(0, len(label_rows), _CHUNK):
        stmt = dialect_insert(s, JobLabel.__table__)
        stmt = stmt.on_conflict_do_update(index_elements=["job_id", "key"],
                                          set_={"value": stmt.excluded.value})
        s.execute(stmt, label_rows[i:i + _CHUNK])
    _renumber(s, sorted(set(ids.values())))
    return len(segments)


# a record that does not end its job (REQUEUED, RESIZING) is followed by the job's next record,
# submitted when it ended; this much clock slack is allowed between the two
CHAIN_SLACK_S = 300


@dataclass
class _Generation:
    """One job of a (possibly reused) id while segments are assigned."""

    submit: int  # the earliest submission seen of the job (its key)
    ended: int | None  # the end of a record that ended the job (COMPLETED, FAILED, ...)
    segs: dict[int, int | None]  # segment start -> end (None: open)
    pk: int | None = None
    was: int | None = None  # submit_epoch of its row as loaded (None: new)

    def holds(self, submit: int) -> bool:
        """Whether a record submitted at ``submit`` (not before this job) is this job's: it was
        submitted before the job ended, while it ran, or when a record that does not end it
        ended."""
        if any(e is None for e in self.segs.values()):
            return True  # still running as far as the ledger knows: an id is never reused then
        if self.ended is not None:  # a requeue's next run is submitted the second it ended
            return submit <= self.ended
        return submit <= max((e for e in self.segs.values() if e is not None),
                             default=self.submit) + CHAIN_SLACK_S


def assign_jobs(s: Session, segments: Sequence[Segment]) -> list[int]:
    """The submit time (``jobs.submit_epoch``) of the job each segment belongs to, in the
    order of ``segments``; rows of one job found split are merged here (same session).

    Per (cluster, job id), records in submit order: a record whose segment the ledger already
    has stays with that job; else it belongs to the job of that id submitted last before it if
    that job :meth:`~_Generation.holds` it (a resize or requeue record carries its own, later
    submission), or to the next job if it holds that one's start; otherwise it starts a new job
    (the id was reused). Windows may arrive in any order: a record that later joins two jobs
    merges them, so the ledger ends as one full read would leave it."""
    known = _generations(s, segments)
    out = [0] * len(segments)
    order = sorted(range(len(segments)), key=lambda k: (segments[k].cluster, segments[k].job_id,
                                                        segments[k].submit, segments[k].start))
    for n in order:
        seg = segments[n]
        gens = known.setdefault((seg.cluster, seg.job_id), [])
        job = _place(gens, seg)
        job.segs[seg.start] = seg.end
        if job.ended is not None and seg.start >= job.ended:
            job.ended = None  # it ran on after what looked like its end (read before a requeue)
        if seg.end is not None and seg.state.split()[0] not in _NOT_ENDED:
            job.ended = max(job.ended or 0, seg.end)
        _merge(s, gens)
    for gens in known.values():
        for job in gens:
            if job.pk is not None and job.was != job.submit:
                s.execute(update(Job).where(Job.id == job.pk).values(submit_epoch=job.submit))
    for n in order:
        seg = segments[n]
        gens = known[(seg.cluster, seg.job_id)]
        out[n] = next(g.submit for g in gens if seg.start in g.segs)
    return out


def _generations(s: Session, segments: Sequence[Segment]) -> dict[tuple[str, str], list[_Generation]]:
    """The ledger's jobs of the segments' ids, with their segments' starts and ends."""
    known: dict[tuple[str, str], list[_Generation]] = {}
    by_pk: dict[int, _Generation] = {}
    ids = sorted({g.job_id for g in segments})
    clusters = {g.cluster for g in segments}
    for i in range(0, len(ids), _CHUNK):
        rows = s.execute(select(Job.cluster, Job.slurm_job_id, Job.id, Job.submit_epoch,
                                Job.ended_epoch, UsageRecord.start_epoch, UsageRecord.end_epoch)
                         .outerjoin(UsageRecord, UsageRecord.job_id == Job.id)
                         .where(Job.slurm_job_id.in_(ids[i:i + _CHUNK])))
        for c, j, pk, sub, ended, start, end in rows:
            if c not in clusters:
                continue
            if pk not in by_pk:
                by_pk[pk] = _Generation(sub, ended, {}, pk, sub)
                known.setdefault((c, j), []).append(by_pk[pk])
            if start is not None:
                by_pk[pk].segs[start] = end
    for job in by_pk.values():  # jobs.ended_epoch is never erased: one read before a requeue
        if job.ended is not None and any(start >= job.ended for start in job.segs):
            job.ended = None
    return known


def _place(gens: list[_Generation], seg: Segment) -> _Generation:
    for g in gens:
        if seg.start in g.segs:
            return g  # the same segment read again
    gens.sort(key=lambda g: g.submit)
    before = [g for g in gens if g.submit <= seg.submit]
    if before and before[-1].holds(seg.submit):
        return before[-1]
    after = [g for g in gens if g.submit > seg.submit]
    alone = _Generation(seg.submit, None, {seg.start: seg.end})
    if seg.end is not None and seg.state.split()[0] not in _NOT_ENDED:
        alone.ended = seg.end
    if after and alone.holds(after[0].submit):
        after[0].submit = seg.submit
        return after[0]
    gens.append(_Generation(seg.submit, None, {}))
    return gens[-1]


def _merge(s: Session, gens: list[_Generation]) -> None:
    """Merge each job into the one before it while that one holds its start."""
    gens.sort(key=lambda g: g.submit)
    i = 0
    while i + 1 < len(gens):
        a, b = gens[i], gens[i + 1]
        if not a.holds(b.submit):
            i += 1
            continue
        a.segs.update(b.segs)
        a.ended = max(a.ended or 0, b.ended or 0) or None
        if b.pk is not None:
            if a.pk is None:
                a.pk, a.was = b.pk, b.was
            else:
                _move_rows(s, b.pk, a.pk)
        del gens[i + 1]


def _move_rows(s: Session, src: int, dst: int) -> None:
    """Everything the ledger keeps for job row ``src`` moves to ``dst``; ``src`` is deleted."""
    from railgang.db.ledger import ProgressSample
    from railgang.db.steps import StepTiming

    s.execute(update(UsageRecord).where(UsageRecord.job_id == src).values(job_id=dst)
              .execution_options(synchronize_session=False))
    for table in (ProgressSample, StepTiming):
        taken = select(table.t_epoch).where(table.job_id == dst).scalar_subquery()
        s.execute(update(table).where(table.job_id == src, table.t_epoch.not_in(taken))
                  .values(job_id=dst).execution_options(synchronize_session=False))
    s.execute(delete(JobLabel).where(JobLabel.job_id == src))  # the same Comment: the same labels
    for table in (ProgressSample, StepTiming):
        s.execute(delete(table).where(table.job_id == src))
    s.execute(delete(Job).where(Job.id == src))


def job_of(s: Session, cluster: str, job_id: str, submit: float) -> int | None:
    """The ledger's row id of the job ``job_id`` submitted at ``submit`` (the rule of
    :func:`assign_jobs`): the last one submitted at or before it that had not ended by then."""
    row = s.execute(select(Job.id, Job.ended_epoch)
                    .where(Job.cluster == cluster, Job.slurm_job_id == job_id,
                           Job.submit_epoch <= int(submit))
                    .order_by(Job.submit_epoch.desc()).limit(1)).first()
    if row is None or (row[1] is not None and row[1] < int(submit)):
        return None
    return int(row[0])


# states of a record after which the job runs again (or still runs): not its end
_NOT_ENDED = frozenset({"RUNNING", "RESIZING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                        "PENDING", "SUSPENDED"})


def _run(g: Segment) -> dict[str, int | None]:
    """The job's time limit and, once its last run ended, that run's length."""
    ended = g.end is not None and g.state.split()[0] not in _NOT_ENDED
    return {"time_limit_s": g.time_limit_s,
            "run_s": (g.end or 0) - (g.run_start or g.start) if ended else None,
            "ended_epoch": g.end if ended else None}


def _renumber(s: Session, job_ids: list[int]) -> None:
    """``segment`` = the segment's place within its job (0, 1, ...), in start order."""
    u2 = aliased(UsageRecord)
    ordinal = (select(func.count()).select_from(u2)
               .where(u2.job_id == UsageRecord.job_id, u2.start_epoch < UsageRecord.start_epoch)
               .scalar_subquery())
    for i in range(0, len(job_ids), _CHUNK):
        s.execute(update(UsageRecord).where(UsageRecord.job_id.in_(job_ids[i:i + _CHUNK]))
                  .values(segment=ordinal).execution_options(synchronize_session=False))


def watermark(s: Session, source: str) -> datetime | None:
    row = s.get(LedgerWatermark, source)
    return None if row is None else row.ingested_until


def advance_watermark(s: Session, source: str, until: datetime, *,
                      now: datetime | None = None) -> datetime:
    """Move the watermark forward (never back: re-ingesting an old window keeps it), except
    that a watermark later than ``now`` (written before issue 18 row 7 refused such windows) is
    replaced by ``until``: nothing can have been ingested past now."""
    row = s.get(LedgerWatermark, source)
    now = now or datetime.now(UTC)
    if row is None:
        s.add(LedgerWatermark(source=source, ingested_until=until, updated_at=now))
        return until
    if until > row.ingested_until or row.ingested_until > now:
        row.ingested_until = until
    row.updated_at = now
    return row.ingested_until


def ledger_segments(s: Session, *, since: int, until: int) -> list[tuple[str, str, int, int | None,
                                                                         int]]:
    """``(cluster, job, start, end, gpus)`` of the segments overlapping [since, until)."""
    q = (select(Job.cluster, Job.slurm_job_id, UsageRecord.start_epoch, UsageRecord.end_epoch,
                UsageRecord.gpus).join(Job, Job.id == UsageRecord.job_id)
         .where(_overlaps(since, until)).order_by(Job.cluster, Job.slurm_job_id,
                                                  UsageRecord.start_epoch))
    return [tuple(r) for r in s.execute(q)]  # type: ignore[misc]


def _overlaps(since: int, until: int) -> ColumnElement[bool]:
    return and_(UsageRecord.start_epoch < until,
                or_(UsageRecord.end_epoch.is_(None), UsageRecord.end_epoch > since))


@dataclass(frozen=True, slots=True)
class UsageQuery:
    since: int
    until: int
    now: int
    group_by: tuple[str, ...] = ("team",)
    label: str | None = None  # label key for the "label" dimension
    teams: frozenset[str] | None = None  # None: every team
    limit: int = 100
    offset: int = 0


def usage(s: Session, q: UsageQuery) -> tuple[int, list[dict[str, Any]]]:
    """GPU-seconds allocated / compute / productive and cost over [since, until), grouped.

    A segment counts only the part of it inside the window; an open segment counts up to
    ``now``. Cost = GPU-hours × the rate of its GPU type and capacity tier; GPU-seconds with no
    rate are reported as ``unpriced_gpu_seconds`` (never silently priced at 0)."""
    bad = [d for d in q.group_by if d not in DIMENSIONS]
    if bad or ("label" in q.group_by and not q.label):
        raise ValidationFailed("invalid grouping", fields={
            "group_by": f"choose from {', '.join(DIMENSIONS)}" if bad else
            "grouping by label needs label=<key>"})
    end = case((UsageRecord.end_epoch.is_(None), literal(q.now)), else_=UsageRecord.end_epoch)
    e = case((end < q.until, end), else_=literal(q.until))
    st = case((UsageRecord.start_epoch > q.since, UsageRecord.start_epoch),
              else_=literal(q.since))
    gsec = UsageRecord.gpus * case((e > st, e - st), else_=0)
    parent = aliased(Account)
    team_acc = aliased(Account)
    cols: dict[str, Any] = {
        "team": UsageRecord.account, "department": parent.name, "user": UsageRecord.user,
        "gpu_type": UsageRecord.gpu_type, "capacity": UsageRecord.capacity,
        "tier": UsageRecord.tier, "job": Job.slurm_job_id, "label": JobLabel.value}
    dims = [cols[d].label(d) for d in q.group_by]
    stmt = (select(*dims,
                   func.sum(gsec).label("gpu_seconds"),
                   func.sum(gsec * UsageRecord.compute_fraction).label("compute_gpu_seconds"),
                   func.sum(gsec * UsageRecord.productive_fraction).label(
                       "productive_gpu_seconds"),
                   func.sum(gsec * Rate.per_gpu_hour / 3600.0).label("cost"),
                   func.sum(case((Rate.id.is_(None), gsec), else_=0)).label(
                       "unpriced_gpu_seconds"))
            .select_from(UsageRecord)
            .outerjoin(Rate, and_(Rate.gpu_type == UsageRecord.gpu_type,
                                  Rate.capacity == UsageRecord.capacity))
            .where(_overlaps(q.since, q.until)))
    if "job" in q.group_by:
        stmt = stmt.join(Job, Job.id == UsageRecord.job_id)
    if "department" in q.group_by:
        stmt = (stmt.outerjoin(team_acc, team_acc.name == UsageRecord.account)
                .outerjoin(parent, parent.id == team_acc.parent_id))
    if "label" in q.group_by:
        stmt = stmt.join(JobLabel, and_(JobLabel.job_id == UsageRecord.job_id,
                                        JobLabel.key == q.label))
    if q.teams is not None:
        stmt = stmt.where(UsageRecord.account.in_(sorted(q.teams)))
    if dims:
        stmt = stmt.group_by(*[cols[d] for d in q.group_by]).order_by(
            *[cols[d] for d in q.group_by])
    # one pass: the number of groups rides along as a window aggregate (no second query)
    stmt = stmt.add_columns(func.count().over().label("total_groups"))
    total = 0
    out = []
    for r in s.execute(stmt.limit(q.limit).offset(q.offset)):
        m = r._mapping
        total = int(m["total_groups"])
        item: dict[str, Any] = {d: m[d] for d in q.group_by}
        gs = int(m["gpu_seconds"] or 0)
        item.update(gpu_seconds=gs, gpu_hours=round(gs / 3600, 6),
                    compute_gpu_seconds=_opt(m["compute_gpu_seconds"]),
                    productive_gpu_seconds=_opt(m["productive_gpu_seconds"]),
                    cost=round(float(m["cost"] or 0.0), 6),
                    unpriced_gpu_seconds=int(m["unpriced_gpu_seconds"] or 0))
        out.append(item)
    if not out and q.offset > 0:  # past the last page: count the groups the plain way
        total = int(s.scalar(select(func.count()).select_from(stmt.subquery())) or 0)
    return total, out


def _opt(v: Any) -> float | None:
    return None if v is None else round(float(v), 3)


__all__ = ["DIMENSIONS", "UsageQuery", "advance_watermark", "assign_jobs", "dialect_insert", "job_of",
           "ledger_segments", "upsert_segments",
           "usage", "watermark"]
