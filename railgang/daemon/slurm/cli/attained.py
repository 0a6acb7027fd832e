"""Attained service: the GPU-seconds each job has received over all its runs, from Slurm alone.

Tiresias' queues, Themis' ρ and ``default``'s fairness read ``JobState.attained_gpu_s``. On a
real cluster it comes from two places, never from the job's own Comment (a user writes that):

1. **The current run**, from the squeue record the cycle already read: the GPUs the job holds
   (its allocation, 22.05's ``gres_detail`` or 24.11+'s ``job_resources``) times the time since
   it started, or since its last resize (``resize_time``).
2. **Every earlier run**, from ``sacct --json --duplicates``: one record per allocation
   interval, so a requeue (a railgang preemption or grow, an admin's requeue, a node failure)
   leaves a REQUEUED/NODE_FAIL/PREEMPTED record and a shrink a RESIZING one, each with its GPU
   count (``tres.allocated`` gres/gpu: needs ``AccountingStorageTRES=gres/gpu``, as the ledger
   does). Only ended intervals count; the open one is the current run, counted from squeue.

sacct is asked only for jobs of the current snapshot that have an earlier interval at all
(restarted or resized), in batches of :data:`BATCH` ids, and the sum is kept per job id and
(restart count, resize time): a cycle pays no sacct call unless a job was requeued or resized
since the last one. A daemon restart reads it again, so attained service survives restarts
without a file of its own. Slurm reuses job ids (``MaxJobId`` wraps, or slurmctld's state is
reset): an interval that ended long before the next one of the same id was submitted belongs to
another job and is left out (:data:`CHAIN_SLACK_S`).

Hostile input (docs/security.md): a record with a time that is not a whole number, negative,
NaN, or later than now, or with a GPU count that is not one, is skipped with a warning naming
its job; output past :data:`MAX_SACCT_BYTES` or not JSON is one warning and nothing is cached
(the jobs keep what was known, and the read is tried again after :data:`RETRY_S`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from railgang.daemon.slurm.cli.parse import ParseProblem
from railgang.daemon.slurm.cli.records import RECORD_ERRORS, SqueueJob, load_json, record_name
from railgang.daemon.slurm.cli.schemas import reader_for, schema_of
from railgang.errors import SlurmError

BATCH = 200  # job ids per sacct call (one argument list)
MAX_IDS_PER_CYCLE = 400  # at most this many jobs' history read in one cycle; the rest next cycle
MAX_SACCT_BYTES = 64 << 20  # sacct output of one batch beyond this is refused, not parsed
MAX_GPUS = 1 << 20  # GPUs one record may hold; more is a broken record
CHAIN_SLACK_S = 600.0  # an earlier interval ends when the next is submitted (requeue, resize)
FUTURE_SLACK_S = 60.0  # clocks of slurmctld's and the daemon's host may differ this much
RETRY_S = 300.0  # after sacct failed (no slurmdbd, an unreadable answer): ask again this late


@dataclass(frozen=True, slots=True)
class Interval:
    """One sacct record of a job: an allocation interval (``end`` 0: still open)."""

    job_id: str
    submit: float
    start: float  # max(time.start, time.submission): a resize stamps the submission
    end: float
    gpus: int


def _time(t: Mapping[str, Any], key: str, now: float) -> float:
    raw = t.get(key)
    if isinstance(raw, dict):  # 24.11+: {"set": .., "number": ..}
        raw = raw.get("number") if raw.get("set", True) else 0
    if raw is None:
        return 0.0
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ValueError(f"time.{key} is {str(raw)[:20]}, not a time")
    if raw < 0 or raw > now + FUTURE_SLACK_S:
        raise ValueError(f"time.{key} {raw:.0f} is {'negative' if raw < 0 else 'in the future'}")
    return float(raw)


def _gpus(tres: Any) -> int:
    count = 0
    for t in tres if isinstance(tres, list) else []:
        if isinstance(t, dict) and t.get("type") == "gres" and str(t.get("name") or "").startswith("gpu"):
            n = t.get("count") or 0
            if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_GPUS:
                raise ValueError(f"tres gpu count {str(n)[:20]} is not a GPU count")
            count += n
    return count


def _interval(rec: dict[str, Any], now: float) -> Interval | None:
    job_id = rec["job_id"]
    if isinstance(job_id, bool) or not isinstance(job_id, int | str) or len(str(job_id)) > 32:
        raise ValueError(f"job_id {str(job_id)[:40]} is not a Slurm job id")
    t = rec["time"]
    if not isinstance(t, dict):
        raise TypeError("time is not an object")
    start, end, submit = _time(t, "start", now), _time(t, "end", now), _time(t, "submission", now)
    if start == 0:
        return None  # never started: no service
    tres = rec.get("tres")
    gpus = _gpus(tres.get("allocated") if isinstance(tres, dict) else None)
    begin = max(start, submit)
    if end and end < begin:
        raise ValueError(f"ends ({end:.0f}) before it starts ({begin:.0f})")
    return Interval(str(job_id), submit, begin, end, gpus)


def parse_intervals(text: str, now: float) -> tuple[dict[str, list[Interval]], list[str]]:
    """``sacct --json --duplicates`` -> every job's intervals, oldest first, plus one line per
    record skipped (naming its job). Raises :class:`ParseProblem` (one line) when the document
    as a whole cannot be read: too large, not JSON, no ``jobs`` list, an unknown schema."""
    if len(text) > MAX_SACCT_BYTES:
        raise ParseProblem(f"sacct --json: output of {len(text)} bytes is past the "
                           f"{MAX_SACCT_BYTES}-byte limit")
    doc = load_json(text, "sacct --json")
    if not isinstance(doc.get("jobs"), list):
        raise ParseProblem("sacct --json: no 'jobs' list")
    reader = reader_for(schema_of(doc, "sacct --json"))
    out: dict[str, list[Interval]] = {}
    notes: list[str] = []
    for rec in doc["jobs"]:
        try:
            if not isinstance(rec, dict):
                raise TypeError("not an object")
            iv = _interval(reader.accounting(rec) if reader else rec, now)
        except RECORD_ERRORS as exc:
            notes.append(f"job {record_name(rec)}: sacct record skipped for attained service "
                         f"({type(exc).__name__}: {str(exc)[:100]})")
            continue
        if iv is not None:
            out.setdefault(iv.job_id, []).append(iv)
    for ivs in out.values():
        ivs.sort(key=lambda i: (i.start, i.end or math.inf))
    return out, notes


def earlier_gpu_s(intervals: Iterable[Interval], submit: float, active: bool) -> tuple[float, bool]:
    """GPU-seconds of a job's ended intervals that belong to it, and whether the history is
    complete. ``submit``: its (last) submit time from squeue, which a requeue resets to the
    moment the run before ended. Walking back from the newest, an interval belongs to the job
    while it ended no earlier than :data:`CHAIN_SLACK_S` before the next one was submitted (an
    id Slurm reused is another job's). Incomplete: an interval is still open that is not the
    current run (the latest one of a running job): sacct has not yet heard of the requeue. It
    counts as ended at ``submit`` meanwhile, and the caller asks again."""
    ivs = list(intervals)
    opened = sorted((i for i in ivs if not i.end), key=lambda i: i.start)
    lagging = opened[:-1] if active else opened
    ended = [i for i in ivs if i.end] + [
        Interval(i.job_id, i.submit, i.start, submit, i.gpus) for i in lagging if i.start < submit]
    total, anchor = 0.0, submit
    for iv in sorted(ended, key=lambda i: i.end, reverse=True):
        if iv.end < anchor - CHAIN_SLACK_S:
            break
        total += iv.gpus * (iv.end - iv.start)
        anchor = min(anchor, iv.submit or iv.start)
    return total, not lagging


def current_gpu_s(rec: SqueueJob, now: float) -> tuple[float, str]:
    """GPU-seconds of a running job's current run (since it started or was last resized), and a
    problem ("" when none): a start time that is not a time or lies in the future counts 0."""
    if rec.state != "RUNNING":
        return 0.0, ""
    since = max(rec.start_time, rec.resize_time)
    if not math.isfinite(since) or rec.start_time <= 0 or since > now + FUTURE_SLACK_S:
        return 0.0, (f"job {rec.job_id}: start time {since!r} is not a past time; its current run "
                     "counts no attained service")
    held = sum(len(idx) for _, idx in rec.allocation)
    return held * max(0.0, now - since), ""


def sacct_argv(job_ids: Iterable[str], json_flag: str = "--json") -> list[str]:
    """One batch's argument list (never a shell): every record of these ids, requeues included."""
    return ["sacct", json_flag, "--duplicates", "--allusers", "--jobs=" + ",".join(job_ids)]


def _key(rec: SqueueJob) -> tuple[int, float]:
    return rec.restarts, rec.resize_time


class AttainedService:
    """The backend's per-job memory of earlier runs (STYLE 20: speed behind a seam, compared
    with a plain rebuild in the tests). ``run``: runs an argument list, returns stdout or raises
    (the backend's runner)."""

    def __init__(self, run: Callable[[list[str]], str]) -> None:
        self._run = run
        self._earlier: dict[str, tuple[tuple[int, float], float]] = {}  # id -> (key, GPU-s)
        self._retry_at = -math.inf
        self.calls = 0  # sacct processes forked so far (tests, benchmarks)

    def attained(self, jobs: Iterable[SqueueJob], now: float,
                 json_flag: str = "--json") -> tuple[dict[str, float], list[str]]:
        """Each railgang job's attained GPU-seconds as of ``now``, and one line per problem."""
        ours = [j for j in jobs if j.tag is not None and (j.pending or j.active)]
        notes: list[str] = []
        stale = [j for j in ours if (j.restarts > 0 or j.resize_time > 0)
                 and self._earlier.get(j.job_id, ((-1, 0.0), 0.0))[0] != _key(j)]
        if stale and now >= self._retry_at:
            notes += self._read(stale[:MAX_IDS_PER_CYCLE], now, json_flag)
        self._earlier = {j.job_id: self._earlier[j.job_id] for j in ours if j.job_id in self._earlier}
        out = {}
        for j in ours:
            now_gpu_s, problem = current_gpu_s(j, now)
            if problem:
                notes.append(problem)
            # a key not read yet keeps the last sum known: a lower bound, never more than Slurm said
            out[j.job_id] = self._earlier.get(j.job_id, ((0, 0.0), 0.0))[1] + now_gpu_s
        return out, notes

    def _read(self, stale: list[SqueueJob], now: float, json_flag: str) -> list[str]:
        notes: list[str] = []
        for i in range(0, len(stale), BATCH):
            batch = stale[i:i + BATCH]
            try:
                self.calls += 1
                found, skipped = parse_intervals(self._run(sacct_argv([j.job_id for j in batch], json_flag)), now)
            except (ParseProblem, SlurmError, OSError) as exc:  # the cycle goes on without
                return [*notes, self._failed(exc, now)]
            notes += skipped
            for j in batch:
                gpu_s, complete = earlier_gpu_s(found.get(j.job_id, ()), j.submit_time, j.active)
                # incomplete: its last run counts as ended at the requeue, under a key that
                # matches no job, so that it is read again next cycle
                self._earlier[j.job_id] = (_key(j) if complete else (-1, -1.0), gpu_s)
                if not complete:
                    notes.append(f"job {j.job_id}: sacct does not show its requeue yet; its "
                                 "earlier runs are read again next cycle")
        return notes

    def _failed(self, exc: Exception, now: float) -> str:
        self._retry_at = now + RETRY_S
        return (f"sacct failed ({str(exc)[:160]}); earlier runs of requeued jobs count the last "
                f"known attained service, asked again in {RETRY_S:.0f} s")


__all__ = ["BATCH", "CHAIN_SLACK_S", "MAX_SACCT_BYTES", "AttainedService", "Interval",
           "current_gpu_s", "earlier_gpu_s", "parse_intervals", "sacct_argv"]
