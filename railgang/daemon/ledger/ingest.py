"""Ingest windows of Slurm accounting into the ledger, exactly once, and reconcile against it.

One window = one ``sacct --json`` call, one transaction: the segments it returned are upserted
by key and the watermark moves to the window's end in the same commit. A crash before the
commit leaves neither; re-running any window (or an overlapping one) rewrites the same rows.

A window never ends in the future (issue 18 row 7): the watermark would move past jobs that have
not ended yet, and every later ingest would start after them. ``--until`` later than now is
refused; a watermark found in the future (written before this rule) is refused too, until an
ingest with an explicit ``--since`` resets it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine

from railgang.daemon.config import LedgerSettings
from railgang.daemon.ledger.sacct import Segment, parse_sacct, sacct_command
from railgang.daemon.ledger.telemetry import store_step_timing
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.db.repositories import ledger as repo
from railgang.db.session import session_scope
from railgang.errors import InputError, SlurmCommandError

Fetch = Callable[[datetime, datetime], str]
"""``(since, until) -> sacct --json text`` of that window."""


def _fmt(t: datetime) -> str:
    # sacct reads a time without a zone as local time, in the same TZ as this process
    return t.astimezone().strftime("%Y-%m-%dT%H:%M:%S")


def sacct_fetcher(runner: SlurmRunner) -> Fetch:
    def fetch(since: datetime, until: datetime) -> str:
        # a read (its time grows with the window's jobs); a partial answer with rc != 0 is kept
        res = runner.attempt(sacct_command(_fmt(since), _fmt(until)), grow_timeout=True)
        if not res.ok and '"jobs"' not in res.stdout:
            raise SlurmCommandError(list(res.argv), res.rc, res.message)
        return res.stdout
    return fetch


def capacity_for(settings: LedgerSettings) -> Callable[[Segment], str]:
    def capacity(seg: Segment) -> str:
        return settings.capacity_by_partition.get(seg.partition, settings.default_capacity)
    return capacity


@dataclass(frozen=True, slots=True)
class IngestResult:
    since: datetime
    until: datetime
    segments: int
    watermark: datetime
    step_timings: int = 0  # progress reports with step and compute time seen in the window


def source_name(cluster: str) -> str:
    return f"sacct:{cluster}"


def not_in_future(until: datetime, now: datetime) -> None:
    """Refuse a window end later than ``now`` (InputError, one line)."""
    if until > now:
        raise InputError(f"--until {until.isoformat(timespec='seconds')} is in the future (now "
                         f"{now.isoformat(timespec='seconds')}); the ledger ingests only what has "
                         "happened, leave --until out for now", field="until")


def ingest_window(engine: Engine, fetch: Fetch, since: datetime, until: datetime, *,
                  settings: LedgerSettings, cluster: str,
                  now: datetime | None = None) -> IngestResult:
    if until <= since:
        raise InputError(f"--until {until.isoformat()} is not after --since {since.isoformat()}",
                         field="until")
    now = now or datetime.now(UTC)
    not_in_future(until, now)
    text = fetch(since, until)
    segments = parse_sacct(text, source=f"sacct {_fmt(since)}..{_fmt(until)}",
                           default_gpu_type=settings.default_gpu_type)
    with session_scope(engine) as s:
        n = repo.upsert_segments(s, segments, capacity_of=capacity_for(settings))
        timed = 0
        for seg in _latest_progress(segments):  # the training helper's report (job Comment)
            pk = repo.job_of(s, seg.cluster, seg.job_id, seg.submit)
            if pk is not None and seg.progress is not None:
                timed += store_step_timing(s, pk, seg.progress, every_s=settings.step_timing_every_s)
        mark = repo.advance_watermark(s, source_name(cluster), until, now=now)
    return IngestResult(since, until, n, mark, timed)


def _latest_progress(segments: list[Segment]) -> list[Segment]:
    """One segment per job that carries a progress report (sacct repeats the Comment on every
    record of the job)."""
    out: dict[tuple[str, str], Segment] = {}
    for seg in segments:
        if seg.progress is not None:
            out[(seg.cluster, seg.job_id)] = seg
    return list(out.values())


def default_since(engine: Engine, *, settings: LedgerSettings, cluster: str,
                  now: datetime) -> datetime:
    """The watermark minus the overlap, or ``first_lookback_s`` ago on a first run; InputError
    when the watermark is later than ``now`` (no window could start before it)."""
    with session_scope(engine) as s:
        mark = repo.watermark(s, source_name(cluster))
    if mark is None:
        return now - timedelta(seconds=settings.first_lookback_s)
    if mark > now:
        raise InputError(f"the watermark {mark.isoformat(timespec='seconds')} is in the future "
                         "(an --until past now was accepted before); ingest again with --since "
                         "the last time ingested correctly, which resets it", field="since")
    return mark - timedelta(seconds=settings.overlap_s)


@dataclass
class Difference:
    cluster: str
    job: str
    start: int | None
    kind: str  # missing | extra | gpus | end
    detail: str


@dataclass
class ReconcileReport:
    since: int
    until: int
    sacct_gpu_seconds: int = 0
    ledger_gpu_seconds: int = 0
    differences: list[Difference] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.differences and self.sacct_gpu_seconds == self.ledger_gpu_seconds


def reconcile(engine: Engine, fetch: Fetch, since: datetime, until: datetime, *,
              settings: LedgerSettings, now: datetime) -> ReconcileReport:
    """Every difference between sacct's segments of the window and the ledger's: segments
    missing from the ledger, segments sacct no longer has, GPU counts and ends that disagree,
    and the GPU-seconds of both clipped to the window."""
    lo, hi, t_now = int(since.timestamp()), int(until.timestamp()), int(now.timestamp())
    sacct = parse_sacct(fetch(since, until), source="sacct (reconcile)",
                        default_gpu_type=settings.default_gpu_type)
    want = {(g.cluster, g.job_id, g.start): g for g in sacct if g.start < hi and
            (g.end is None or g.end > lo)}
    with session_scope(engine) as s:
        have = {(c, j, st): (end, gpus) for c, j, st, end, gpus in
                repo.ledger_segments(s, since=lo, until=hi)}
    rep = ReconcileReport(lo, hi)

    def clipped(start: int, end: int | None, gpus: int) -> int:
        return gpus * max(0, min(end if end is not None else t_now, hi) - max(start, lo))

    for key, g in sorted(want.items()):
        rep.sacct_gpu_seconds += clipped(g.start, g.end, g.gpus)
        if key not in have:
            rep.differences.append(Difference(*key, "missing",
                                              f"{g.gpus} GPUs from {g.start} not in the ledger"))
            continue
        end, gpus = have[key]
        if gpus != g.gpus:
            rep.differences.append(Difference(*key, "gpus", f"sacct {g.gpus}, ledger {gpus}"))
        if end != g.end:
            rep.differences.append(Difference(*key, "end", f"sacct {g.end}, ledger {end}"))
    jobs_in_sacct = {(c, j) for c, j, _ in want}
    for key, (end, gpus) in sorted(have.items()):
        rep.ledger_gpu_seconds += clipped(key[2], end, gpus)
        if key not in want and (key[0], key[1]) in jobs_in_sacct:
            rep.differences.append(Difference(*key, "extra",
                                              "segment in the ledger that sacct does not show"))
        elif key not in want:
            rep.differences.append(Difference(*key, "extra", "job not in sacct's window"))
    return rep


__all__ = ["Difference", "Fetch", "IngestResult", "ReconcileReport", "capacity_for",
           "default_since", "ingest_window", "not_in_future", "reconcile", "sacct_fetcher",
           "source_name"]
