"""Everything one report reads from the database, in one place, as plain values.

Usage and cost come from the ledger's own aggregation (``db.repositories.ledger.usage``: the
same GPU-seconds, tiers and rates as ``/v1/usage`` and ``/v1/chargeback``); segments, jobs,
telemetry and step timings are read for the day's window (plus the earlier days the team-surge
and idle-reservation detectors compare against). Nothing here computes the report: ``build``
does, from a :class:`ReportInputs`, without a database.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from railgang.daemon.report.series import GpuSeries
from railgang.db.ledger import GpuSample, NodeState
from railgang.db.models import Account, Job, UsageRecord
from railgang.db.org import Rate
from railgang.db.repositories import ledger
from railgang.db.steps import StepTiming

DAY_S = 86400
# a job that never ran and ended like this is not waiting (cancelled while pending, refused)
ENDED_UNSTARTED = ("CANCELLED", "FAILED", "TIMEOUT", "REJECTED", "DEADLINE", "COMPLETED")


@dataclass(frozen=True, slots=True)
class Seg:
    job_pk: int
    job: str  # Slurm job id
    team: str
    user: str
    gpu_type: str
    capacity: str
    gpus: int
    nodes: str  # hostlist
    gpu_ids: str
    start: int
    end: int | None  # None: still open
    compute_fraction: float | None
    productive_fraction: float | None


@dataclass(frozen=True, slots=True)
class QueuedJob:
    job: str
    team: str
    gpus: int
    priority_class: int
    submitted: int
    first_start: int | None


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One ``node_states`` row: the node as sinfo showed it from ``at`` on."""

    node: str
    at: int
    state: str
    gpu_type: str
    gpus: int
    reason: str


@dataclass(frozen=True, slots=True)
class EndedJob:
    """A job that ended in the window without completing (failed, cancelled, timed out...)."""

    job: str
    team: str
    user: str
    gpus: int
    state: str
    ended: int | None
    gpu_seconds: float  # held in the window


@dataclass
class ReportInputs:
    since: int
    until: int
    now: int
    usage_team: list[dict[str, Any]]
    usage_job: list[dict[str, Any]]
    usage_pool: list[dict[str, Any]]
    segments: list[Seg]  # overlapping [since, until)
    chains: dict[int, list[Seg]]  # every segment of the jobs above, in start order
    queue: list[QueuedJob]  # jobs that waited at some point of the window
    accounts: dict[str, tuple[int, int | None, str | None]]  # team -> guarantee, limit, dept
    rates: dict[tuple[str, str], float]
    history: dict[str, list[float]]  # team -> GPU-hours of each earlier day, oldest first
    used_recent: dict[str, float]  # team -> GPU-seconds over the idle-reservation span
    recent_span_s: float
    gpus: dict[str, GpuSeries] = field(default_factory=dict)  # "node:gpu" -> the day's samples
    steps: dict[int, tuple[list[int], list[float], list[float]]] = field(default_factory=dict)
    usage_user: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[NodeRecord] = field(default_factory=list)  # each node's rows up to ``until``
    ended: list[EndedJob] = field(default_factory=list)
    currency: str = "USD"  # of the rates ("mixed" when they differ)
    # team -> allocated GPU-hours of each of the last days ending with the window's last day
    daily: dict[str, list[float]] = field(default_factory=dict)


def _usage(s: Session, since: int, until: int, now: int, group: tuple[str, ...],
           teams: frozenset[str] | None) -> list[dict[str, Any]]:
    _, rows = ledger.usage(s, ledger.UsageQuery(since=since, until=until, now=now,
                                                group_by=group, teams=teams, limit=10**9))
    return rows


def _seg(row: Any) -> Seg:
    return Seg(*row)


_SEG_COLS = (UsageRecord.job_id, Job.slurm_job_id, UsageRecord.account, UsageRecord.user,
             UsageRecord.gpu_type, UsageRecord.capacity, UsageRecord.gpus, UsageRecord.nodes,
             UsageRecord.gpu_ids, UsageRecord.start_epoch, UsageRecord.end_epoch,
             UsageRecord.compute_fraction, UsageRecord.productive_fraction)


def load_inputs(s: Session, *, since: int, until: int, now: int, history_days: int,
                recent_s: int, teams: frozenset[str] | None = None,
                telemetry: bool = True) -> ReportInputs:
    overlap = (UsageRecord.start_epoch < until) & (
        UsageRecord.end_epoch.is_(None) | (UsageRecord.end_epoch > since))
    q = select(*_SEG_COLS).join(Job, Job.id == UsageRecord.job_id).where(overlap)
    if teams is not None:
        q = q.where(UsageRecord.account.in_(sorted(teams)))
    segments = [_seg(r) for r in s.execute(q.order_by(UsageRecord.start_epoch, UsageRecord.id))]
    pks = sorted({g.job_pk for g in segments})
    chains: dict[int, list[Seg]] = defaultdict(list)
    for i in range(0, len(pks), 500):
        cq = (select(*_SEG_COLS).join(Job, Job.id == UsageRecord.job_id)
              .where(UsageRecord.job_id.in_(pks[i:i + 500])).order_by(UsageRecord.start_epoch))
        for r in s.execute(cq):
            chains[r[0]].append(_seg(r))
    first = (select(UsageRecord.job_id, func.min(UsageRecord.start_epoch).label("first"))
             .group_by(UsageRecord.job_id).subquery())
    jq = (select(Job.slurm_job_id, Job.account, Job.gpus, Job.priority_class, Job.submitted_at,
                 first.c.first).outerjoin(first, first.c.job_id == Job.id)
          .where(Job.submitted_at < _dt(until))
          .where((first.c.first.is_(None) & Job.state.not_in(ENDED_UNSTARTED))
                 | (first.c.first >= since)))
    if teams is not None:
        jq = jq.where(Job.account.in_(sorted(teams)))
    queue = [QueuedJob(j, a, g, pc, int(sub.timestamp()), None if f is None else int(f))
             for j, a, g, pc, sub, f in s.execute(jq)]
    parent = {a.id: a.name for a in s.scalars(select(Account))}
    accounts = {a.name: (a.guaranteed_gpus, a.limit_gpus,
                         parent.get(a.parent_id) if a.parent_id is not None else None)
                for a in s.scalars(select(Account).where(Account.level == "team"))}
    rates = {(r.gpu_type, r.capacity): r.per_gpu_hour for r in s.scalars(select(Rate))}
    history: dict[str, list[float]] = defaultdict(list)
    for d in range(history_days, 0, -1):
        day = {r["team"]: r["gpu_seconds"] / 3600
               for r in _usage(s, since - d * DAY_S, since - (d - 1) * DAY_S, now, ("team",),
                               teams)}
        for team in set(day) | set(history):
            history[team].append(day.get(team, 0.0))
    oldest = s.scalar(select(func.min(UsageRecord.start_epoch))) or until
    span = float(min(recent_s, max(0, until - oldest)))
    used = {r["team"]: float(r["gpu_seconds"])
            for r in _usage(s, until - int(span), until, now, ("team",), teams)} if span else {}
    inputs = ReportInputs(
        since, until, now, _usage(s, since, until, now, ("team",), teams),
        _usage(s, since, until, now, ("job",), teams),
        _usage(s, since, until, now, ("gpu_type",), teams), segments, dict(chains), queue,
        accounts, rates, dict(history), used, span)
    inputs.usage_user = _usage(s, since, until, now, ("user", "team"), teams)
    inputs.daily = load_daily(s, -(-until // DAY_S) * DAY_S, now, teams)  # whole UTC days
    inputs.nodes = load_nodes(s, until)
    inputs.ended = load_ended(s, since, until, segments, teams)
    currencies = sorted({r.currency for r in s.scalars(select(Rate))})
    inputs.currency = currencies[0] if len(currencies) == 1 else "mixed" if currencies else "USD"
    if telemetry:
        inputs.gpus = load_series(s, since, until)
        inputs.steps = load_steps(s, pks, since, until)
    return inputs


TREND_DAYS = 7


def load_daily(s: Session, until: int, now: int, teams: frozenset[str] | None,
               days: int = TREND_DAYS) -> dict[str, list[float]]:
    """team -> allocated GPU-hours per UTC day, the ``days`` days ending at ``until`` (a
    midnight; today's counts up to ``now``)."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0] * days)
    for k in range(days):
        lo = until - (days - k) * DAY_S
        for r in _usage(s, lo, lo + DAY_S, now, ("team",), teams):
            out[r["team"]][k] = r["gpu_seconds"] / 3600
    return dict(out)


FAILED_STATES = ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                 "BOOT_FAIL", "DEADLINE")


def load_nodes(s: Session, until: int) -> list[NodeRecord]:
    """Every ``node_states`` row before ``until``, per node in time order (the inventory and
    the down/drained intervals are made from them in ``inventory``)."""
    q = (select(NodeState.node, NodeState.at_epoch, NodeState.state, NodeState.gpu_type,
                NodeState.gpus, NodeState.reason).where(NodeState.at_epoch < until)
         .order_by(NodeState.node, NodeState.at_epoch))
    return [NodeRecord(*r) for r in s.execute(q)]


def load_ended(s: Session, since: int, until: int, segments: list[Seg],
               teams: frozenset[str] | None) -> list[EndedJob]:
    """Jobs in a failed state that ended in the window (``ended_epoch``), or, where the end is
    not recorded, whose last segment ended in it."""
    held: dict[int, float] = defaultdict(float)
    last_end: dict[int, int] = {}
    for g in segments:
        end = g.end if g.end is not None else until
        held[g.job_pk] += g.gpus * max(0, min(end, until) - max(g.start, since))
        if g.end is not None:
            last_end[g.job_pk] = max(last_end.get(g.job_pk, 0), g.end)
    in_window = (Job.ended_epoch >= since) & (Job.ended_epoch < until)
    pks = sorted(last_end)
    q = (select(Job.id, Job.slurm_job_id, Job.account, Job.user, Job.gpus, Job.state,
                Job.ended_epoch).where(Job.state.in_(FAILED_STATES)))
    if teams is not None:
        q = q.where(Job.account.in_(sorted(teams)))
    out: dict[int, EndedJob] = {}
    for chunk in [pks[i:i + 500] for i in range(0, len(pks), 500)] or [[]]:
        for pk, job, team, user, gpus, state, ended in s.execute(
                q.where(in_window | (Job.ended_epoch.is_(None) & Job.id.in_(chunk)))):
            at: int | None = ended if ended is not None else last_end.get(pk)
            if at is None or not since <= at < until:
                continue
            out[pk] = EndedJob(job, team, user, gpus, state, at, held.get(pk, 0.0))
    return sorted(out.values(), key=lambda e: (-e.gpu_seconds, e.ended or 0, e.job))


def _dt(epoch: int) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC)


def sampled_gpus(s: Session) -> list[tuple[str, int]]:
    """Every (node, GPU) with samples, by seeks along the primary key (node, gpu, time): one
    per node and one per GPU (a loose index scan), not a pass over every sample. (A row-value
    ``(node, gpu) > (?, ?)`` seeks on the node only in SQLite, hence the two levels.)"""
    out: list[tuple[str, int]] = []
    first_node = select(func.min(GpuSample.node))
    next_gpu = select(func.min(GpuSample.gpu)).where(GpuSample.node == bindparam("n"),
                                                    GpuSample.gpu > bindparam("g"))
    node = s.scalar(first_node)
    while node is not None:
        gpu = s.scalar(next_gpu, {"n": node, "g": -1})
        while gpu is not None:
            out.append((node, gpu))
            gpu = s.scalar(next_gpu, {"n": node, "g": gpu})
        node = s.scalar(first_node.where(GpuSample.node > node))
    return out


def load_series(s: Session, since: int, until: int) -> dict[str, GpuSeries]:
    """Every GPU's samples in the window, one array pass (no per-row objects). One range read
    per GPU along the primary key: a day is contiguous there, while the time index would
    fetch each row from a different page (BENCHMARKS.md "sim --ledger")."""
    if not has_samples(s, since, until):
        return {}
    q = (select(GpuSample.at_epoch_ms, GpuSample.sm_util, GpuSample.mem_used_mib,
                GpuSample.power_w)
         .where(GpuSample.node == bindparam("n"), GpuSample.gpu == bindparam("g"),
                GpuSample.at_epoch_ms >= since * 1000, GpuSample.at_epoch_ms < until * 1000)
         .order_by(GpuSample.at_epoch_ms))
    # Core rows through the session's connection: no ORM row processing for a million samples
    conn = s.connection()
    out: dict[str, GpuSeries] = {}
    for node, gpu in sampled_gpus(s):
        rows = conn.execute(q, {"n": node, "g": gpu}).all()
        if not rows:
            continue
        # None (not measured) becomes NaN: a column with any is left out, as before
        block = np.array([tuple(r) for r in rows], dtype=np.float64)
        block[:, 0] /= 1000.0
        mem = None if np.isnan(block[:, 2]).any() else block[:, 2]
        power = None if np.isnan(block[:, 3]).any() else block[:, 3]
        key = f"{node}:{gpu}"
        out[key] = GpuSeries(key, block[:, 0], block[:, 1], mem, power)
    return out


def load_steps(s: Session, pks: list[int], since: int, until: int
               ) -> dict[int, tuple[list[int], list[float], list[float]]]:
    out: dict[int, tuple[list[int], list[float], list[float]]] = {}
    for i in range(0, len(pks), 500):
        q = (select(StepTiming.job_id, StepTiming.t_epoch, StepTiming.step_s,
                    StepTiming.compute_s)
             .where(StepTiming.job_id.in_(pks[i:i + 500]), StepTiming.t_epoch >= since,
                    StepTiming.t_epoch < until).order_by(StepTiming.job_id, StepTiming.t_epoch))
        for pk, t, st, co in s.execute(q):
            ts, a, b = out.setdefault(pk, ([], [], []))
            ts.append(t)
            a.append(st)
            b.append(co)
    return out


def has_data(s: Session, since: int, until: int) -> bool:
    """Whether anything at all happened in the window (segments, samples, or jobs)."""
    seg = s.scalar(select(UsageRecord.id).where(
        UsageRecord.start_epoch < until,
        UsageRecord.end_epoch.is_(None) | (UsageRecord.end_epoch > since)).limit(1))
    if seg is not None:
        return True
    return has_samples(s, since, until)


def has_samples(s: Session, since: int, until: int) -> bool:
    """Whether any GPU sent a sample in the window (the at_epoch_ms index: one seek)."""
    smp = s.scalar(select(GpuSample.gpu).where(GpuSample.at_epoch_ms >= since * 1000,
                                               GpuSample.at_epoch_ms < until * 1000).limit(1))
    return smp is not None


__all__ = ["DAY_S", "ENDED_UNSTARTED", "FAILED_STATES", "TREND_DAYS", "EndedJob", "NodeRecord",
           "QueuedJob", "ReportInputs", "Seg", "has_data", "has_samples", "load_daily",
           "load_ended", "load_inputs", "load_nodes", "load_series", "load_steps",
           "sampled_gpus"]
