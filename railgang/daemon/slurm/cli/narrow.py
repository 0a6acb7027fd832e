"""A narrow ``squeue`` read: the fields the daemon reads, without ``squeue --json``'s every field.

``squeue --json`` writes every field of every job, and the daemon needs every job (waiting,
running, and ended ones it acts on), so no filter helps: at 10,000 waiting jobs 22.05 writes
36.6 MB (it ignores every filter, ``-t``, ``-j``, ``-u``) in 1.5 CPU s of the client and 0.8 s
more to read here; 24.11 writes 97 MB in 5.6-7.9 CPU s (BENCHMARKS.md, "10,000 waiting jobs").
The plain ``squeue -O`` form with only the fields the daemon reads writes 1.4-2.0 MB in
0.07-0.2 s on either. This module reads that form and turns each line into the v0.0.38 record
:func:`records.squeue_job` already reads (24.11/26.05's JSON is turned into the same record,
schemas.py), so both reads go through the same hardened per-record reader; that the records are
equal is tested on 22.05 (tests/daemon/slurm/cli/test_narrow_slurm.py) and on 24.11 and 26.05
(tests/slurm_versions/test_newer_slurm.py).

What the narrow form cannot carry safely, it takes from the last full (JSON) read:

- **the job name and Comment**: between full reads nothing the daemon decides on needs them
  (the Comments of running railgang jobs are read by one more ``squeue -O``, below);
- **GPU indices** of active jobs (``gres_detail``): the plain form has no field for them;
- **the resize time**: 22.05's squeue prints a resized job's ``ResizeTime`` as ``INVALID``.

So the backend (``CliBackend._read_jobs``) reads the JSON whenever the narrow read cannot stand
alone: on the first cycle, at least every ``narrow_full_read_s``, and whenever an active job is
new or changed (started, resized, requeued) since the full read; a job that ended is read from
its line (state, exit code), as the full read would keep it (ended by a signal, NODE_FAIL).
Between full reads a new pending job has no name (``model`` stays empty for the start-time
estimate) on 22.05; where squeue honours ``-j`` (24.11+) the cycle that first lists it reads it
by id with the changed jobs, and instead of a full read every ``narrow_full_read_filtered_s``
each record is read again by id in turn within that period (:meth:`NarrowCache.due`). Running
railgang jobs' Comments (their training progress, which elastic sizing reads) are read every
cycle by one more ``squeue -j ... -O JobID,Comment`` (:func:`parse_comments`).

What users write still reaches the narrow form: a GRES type (22.05, 24.11 and 26.05 take
``--gres=gpu:x|n02|n03:8`` with ``--hold``, and a newline in one), the node names a job asked
for, a Comment. So those are not ended by a character anyone can type: Slurm's own fields
(ids, states, times, counts, node names) come first, each ended by ``|``; the fields a user or
an administrator writes come last, each ended by a mark made afresh for every read
(:func:`new_mark`, 64 random bits), which ends the line as well. No job holds the mark, so
whatever bytes a user writes stay inside their own field: a ``|`` shifts no column, a newline
forges no line. A line that is still not exactly the fields asked for with a numeric job id and a job state, a job
id twice, or a value of Slurm's the plain form cannot carry (a time Slurm prints as
``INVALID``) is a :class:`NarrowProblem`: the cycle reads the JSON instead (logged), never a
guess. A record whose user-written fields :func:`records.squeue_job` refuses skips that job
alone, as the JSON read does.
"""

from __future__ import annotations

import heapq
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from railgang.daemon.slurm.cli.commands import SQUEUE
from railgang.daemon.slurm.cli.parse import ParseProblem, expand_hosts
from railgang.daemon.slurm.cli.records import (
    ACTIVE_STATES,
    BURN_IN_NAME,
    NONE_WORDS,
    PENDING_STATES,
    SqueueJob,
    squeue_job,
    unreadable_job,
)
from railgang.daemon.slurm.cli.schemas import KNOWN_JOB_STATES
from railgang.training import read_progress

# squeue -O field -> the v0.0.38 key it fills. Slurm writes the first ones (ids, states, times,
# counts, node names, the names of accounts and QOS an administrator made): each ends with "|".
# The last ones are text a user or an administrator chose (GRES types: "gpu:x|n02\n99|...:8"
# is a valid --gres; the node names a user asked for; the AdminComment): each ends with the
# read's own mark (new_mark), which no job can hold, so no value can shift a column or forge
# a line, whatever bytes it holds. So do the job's --constraint, --dependency and --reservation
# (Slurm's own rules, rules.py), and what it asks besides GPUs (typed GRES in its TRES, licenses:
# asks.py). 22.05's -O has no field for the --exclude list: it is carried
# from the full read, and read with -o %x for waiting jobs no full read saw (excluded_argv)
FIELDS = (("JobID", "job_id"), ("State", "job_state"), ("Reason", "state_reason"),
          ("Account", "account"), ("UserName", "user_name"), ("QOS", "qos"),
          ("SubmitTime", "submit_time"), ("EligibleTime", "eligible_time"),
          ("StartTime", "start_time"), ("TimeLimit", "time_limit"),
          ("PriorityLong", "priority"), ("RestartCnt", "restart_cnt"), ("NumNodes", "node_count"),
          ("BatchHost", "batch_host"), ("NodeList", "nodes"), ("Requeue", "requeue"),
          ("exit_code", "exit_code"), ("Partition", "partition"), ("HetJobID", "het_job_id"),
          ("OverSubscribe", "shared"), ("ArrayTaskID", "array_task_string"),
          ("ReqNodes", "required_nodes"), ("Feature", "features"),
          ("Tres", "tres_req_str"), ("mem-per-tres", "memory_per_tres"),
          ("cpus-per-tres", "cpus_per_tres"), ("Licenses", "licenses"),
          ("Dependency", "dependency"), ("Reservation", "resv_name"),
          ("admin_comment", "admin_comment"), ("tres-per-job", "tres_per_job"),
          ("tres-per-node", "tres_per_node"))
FREE = 11  # the last FREE fields end with the mark; the others with SEP
SEP = "|"
_AT = {key: i for i, (_, key) in enumerate(FIELDS)}
# what changes when a job starts, is resized or requeued (the JSON is read again then)
_FINGERPRINT = tuple(_AT[k] for k in ("start_time", "restart_cnt", "nodes", "node_count",
                                     "tres_per_job", "tres_per_node"))
_TIMES = frozenset({"submit_time", "eligible_time", "start_time"})
_NONE = NONE_WORDS
# what a job's record takes from the last full read: user text, GPU indices, when it was last
# resized (22.05's squeue prints ResizeTime of a resized job as "INVALID"), and its ask (only the
# JSON says whether memory is per CPU or per node: asks.py)
CARRIED = ("name", "progress", "progress_problem", "allocation", "alloc_problem", "resize_time",
           "excluded_nodes", "ask")


class NarrowProblem(ParseProblem):
    """The narrow output cannot be trusted this cycle; the JSON is read instead."""


def new_mark() -> str:
    """A fresh mark for one read: 64 random bits no user can guess before the read (the mark is
    on squeue's command line only while it runs)."""
    return f"~{secrets.token_hex(8)}~"


def narrow_argv(mark: str) -> list[str]:
    """``squeue -h -t all -O JobID:0|,...,tres-per-node:0MARK``: width 0 prints a field whole,
    ``|`` ends a field Slurm writes, ``mark`` the last of those and each one a user or an
    administrator wrote (and so the line)."""
    last_fixed = len(FIELDS) - FREE - 1  # ended by the mark too: "|" may start a user's field
    spec = ",".join(f"{name}:0{SEP if i < last_fixed else mark}"
                    for i, (name, _) in enumerate(FIELDS))
    return [SQUEUE, "-h", "-t", "all", "-O", spec]


@dataclass(frozen=True, slots=True)
class NarrowRow:
    job_id: str
    line: str  # the fields joined by NUL, which no field holds: an unchanged line is an unchanged record
    fields: tuple[str, ...]

    @property
    def state(self) -> str:
        return self.fields[1]

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES

    @property
    def kind(self) -> str:
        return ("pending" if self.state in PENDING_STATES
                else "active" if self.state in ACTIVE_STATES else "ended")

    @property
    def fingerprint(self) -> tuple[str, ...]:
        """What changes when a job starts, is resized, requeued or ends: pending, active or
        ended, start time, restarts, nodes, node count, GPUs asked for."""
        return (self.kind, *(self.fields[i] for i in _FINGERPRINT))


def _lines(text: str, mark: str, marks: int, what: str) -> list[list[str]]:
    """The lines of output whose every line holds ``marks`` marks, the last just before its
    newline, each line cut at them: ``marks`` pieces. Output is cut at the marks alone, never
    at a newline (a user's text may hold one, even right after a mark); each line but the first
    starts with the newline that ended the one before. :class:`NarrowProblem` when the output
    is not so (cut short, say)."""
    parts = text.split(mark)
    tail = parts.pop()
    lines = [parts[i:i + marks] for i in range(0, len(parts), marks)]
    if tail.strip() or len(parts) % marks or any(not line[0].startswith("\n") for line in lines[1:]):
        raise NarrowProblem(f"{what} is not whole lines of {marks} marked fields "
                            f"({text[-60:]!r})")
    for line in lines[1:]:
        line[0] = line[0][1:]
    return lines


def parse_narrow(text: str, mark: str) -> list[NarrowRow]:
    """The lines of :func:`narrow_argv`'s output with ``mark``. Users write only the fields that
    end with the mark, which none of them can hold, so none of them shifts a column or forges
    a line; anything else is Slurm's and must read as such: a line that is not those fields,
    with a numeric job id and a Slurm job state, or a job id seen twice, is a
    :class:`NarrowProblem`."""
    rows: list[NarrowRow] = []
    seen: set[str] = set()
    fixed = len(FIELDS) - FREE
    for number, (head, *free) in enumerate(_lines(text, mark, FREE + 1, "squeue -O"), start=1):
        fields = (*head.split(SEP, fixed - 1), *free)
        if (len(fields) != len(FIELDS) or not fields[0].isdigit() or fields[0] in seen
                or fields[1] not in KNOWN_JOB_STATES):
            raise NarrowProblem(f"squeue -O line {number} is not {len(FIELDS)} fields with a "
                                f"new job id and a job state ({head[:60]!r})")
        seen.add(fields[0])
        rows.append(NarrowRow(fields[0], "\0".join(fields), fields))
    return rows


def _epoch(text: str) -> float:
    """``2026-12-01T21:39:36`` (the client's local time, as scontrol and squeue print it)."""
    if text in _NONE:
        return 0.0
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError as exc:
        raise ParseProblem(f"time {text[:40]!r} is not YYYY-MM-DDTHH:MM:SS") from exc


def _minutes(text: str) -> int | None:
    """``UNLIMITED`` -> None; ``[D-]HH:MM:SS``, ``MM:SS``, ``MM`` -> whole minutes."""
    if text in ("UNLIMITED", "INFINITE") or text in _NONE:
        return None
    days, _, clock = text.rpartition("-")
    pieces = clock.split(":")
    if len(pieces) > 3 or not all(p.isdigit() for p in pieces) or (days and not days.isdigit()):
        raise ParseProblem(f"time limit {text[:40]!r} is not [D-]HH:MM:SS")
    parts = [int(p) for p in pieces]
    h, m, s = ([0] * (3 - len(parts)) + parts) if len(parts) > 1 else (0, parts[0], 0)
    return (int(days or 0) * 24 + h) * 60 + m + s // 60


def _wait_status(text: str) -> int:
    """The job's wait status, as 22.05's squeue prints it (``10``: killed by signal 10); 24.11+
    print ``EXIT:SIGNAL`` (``0:10``, as sacct does): the signal, else the exit code shifted as a
    wait status holds it. Anything else is a :class:`ParseProblem` (the JSON is read), since
    reading a signal as 0 would lose a checkpointed job's requeue."""
    if text in _NONE:
        return 0
    code, colon, sig = text.partition(":")
    if code.isdigit() and (not colon or sig.isdigit()):
        signal = int(sig) if colon else 0
        return signal if signal else (int(code) if not colon else int(code) << 8)
    raise ParseProblem(f"exit code {text[:40]!r} is neither a wait status nor EXIT:SIGNAL")


def raw_record(row: NarrowRow) -> dict[str, Any]:
    """The v0.0.38 ``jobs[]`` record of ``row`` (without user text and GPU indices)."""
    raw: dict[str, Any] = {}
    for (_, key), text in zip(FIELDS, row.fields, strict=True):
        if key in _TIMES:
            raw[key] = _epoch(text)
        elif key == "time_limit":
            raw[key] = _minutes(text)
        elif key == "exit_code":
            raw[key] = _wait_status(text)
        elif key in ("priority", "restart_cnt", "node_count", "het_job_id"):
            raw[key] = int(text) if text.isdigit() else 0
        elif key == "requeue":
            raw[key] = text != "0"
        elif key == "job_id":
            raw[key] = int(text)
        else:
            raw[key] = "" if text in _NONE else text
    return raw


def merge(rows: list[NarrowRow], before: Mapping[str, tuple[str, SqueueJob]],
          full: Mapping[str, SqueueJob]) -> tuple[list[SqueueJob], list[str]]:
    """The records of the narrow read: a line unchanged since ``before`` (job id -> (line,
    record)) keeps its record; any other line is read by :func:`records.squeue_job` and takes
    the :data:`CARRIED` fields of the job's record in ``full`` (the last full read). Jobs the
    full read left out that are not pending (ended, not signalled) stay out. A field Slurm
    wrote that it cannot read is a :class:`NarrowProblem` (the JSON says what it means); a
    record :func:`records.squeue_job` refuses (what a user wrote) skips that job alone, as the
    JSON read does (:func:`records.unreadable_job`: an active one's nodes stay used)."""
    jobs: list[SqueueJob] = []
    problems: list[str] = []
    for row in rows:
        old = before.get(row.job_id)
        if old is not None and old[0] == row.line:
            jobs.append(old[1])
            continue
        kept = full.get(row.job_id)
        if kept is None and not row.pending:
            continue  # not pending and not kept by the full read: ended history
        try:
            raw = raw_record(row)
        except ParseProblem as exc:  # a value the plain form cannot carry ("INVALID" times)
            raise NarrowProblem(f"job {row.job_id}: {exc}") from exc
        try:  # what a user wrote (a GRES) is read here: as the JSON read, skip the job alone
            job = squeue_job(raw)
        except ParseProblem as exc:
            problems.append(f"{exc}; skipped")
            salvage = unreadable_job(raw, str(exc))
            if salvage is not None:
                jobs.append(salvage)
            continue
        if kept is not None:
            job = replace(job, **{k: getattr(kept, k) for k in CARRIED})
        if row.kind == "ended" and not (job.exit_signal or job.state == "NODE_FAIL"
                                        or job.name.startswith(BURN_IN_NAME)):
            continue  # as parse_squeue(keep_signalled=True): only ends the daemon acts on
        jobs.append(job)
        problems.extend(p for p in (job.tag_problem, job.alloc_problem, job.progress_problem) if p)
    return jobs, problems


def comments_argv(job_ids: list[str], mark: str) -> list[str]:
    """The Comments of running railgang jobs (their training progress, which an elastic job's
    size decisions read): ``squeue -h -j A,B -O JobID:0MARK,Comment:0MARK``."""
    return [SQUEUE, "-h", "-j", ",".join(job_ids), "-O", f"JobID:0{mark},Comment:0{mark}"]


def parse_comments(text: str, job_ids: list[str], mark: str, what: str = "squeue -O Comment",
                   ) -> dict[str, str]:
    """``{job id: Comment}`` of :func:`comments_argv`'s output with ``mark`` (or of
    :func:`excluded_argv`'s, ``what`` naming it). A Comment is the user's text, newlines and
    ``|`` included; only the mark ends it, which no Comment holds. A line of a job not asked
    for, or twice, is a :class:`NarrowProblem`."""
    asked = set(job_ids)
    out: dict[str, str] = {}
    for number, (job_id, comment) in enumerate(_lines(text, mark, 2, what), start=1):
        if job_id not in asked or job_id in out:
            raise NarrowProblem(f"{what} line {number} is not one asked-for job's "
                                f"({job_id[:60]!r})")
        out[job_id] = comment
    return out


def excluded_argv(job_ids: list[str], mark: str) -> list[str]:
    """The ``--exclude`` lists of waiting jobs no full read saw (22.05's ``-O`` has no field
    for them; ``-o %x`` has): ``squeue -h -j A,B -o %iMARK%xMARK``."""
    return [SQUEUE, "-h", "-j", ",".join(job_ids), "-o", f"%i{mark}%x{mark}"]


def with_excluded(jobs: list[SqueueJob], lists: Mapping[str, str]) -> list[SqueueJob]:
    """``jobs`` with the ``--exclude`` list of each job in ``lists`` (:func:`excluded_argv`'s
    output); a list that is not node names is a :class:`NarrowProblem` (the JSON is read)."""
    out = []
    for job in jobs:
        text = lists.get(job.job_id)
        if text is not None:
            try:
                job = replace(job, excluded_nodes=expand_hosts("" if text in _NONE else text))
            except ParseProblem as exc:
                raise NarrowProblem(f"job {job.job_id}: --exclude {text[:40]!r}: {exc}") from exc
        out.append(job)
    return out


def with_progress(jobs: list[SqueueJob], comments: Mapping[str, str]) -> list[SqueueJob]:
    """``jobs`` with the progress report of each job in ``comments`` read afresh (as
    records.squeue_job reads it)."""
    fresh = []
    for job in jobs:
        comment = comments.get(job.job_id)
        if comment is not None:
            try:
                job = replace(job, progress=read_progress(comment), progress_problem="")
            except ValueError as exc:
                job = replace(job, progress=None, progress_problem=f"job {job.job_id}: "
                              f"Comment: {exc}; progress ignored")
        fresh.append(job)
    return fresh


# records read by id in turn (NarrowCache.due), as shares of narrow_full_read_filtered_s: the
# whole queue once per ROTATION, none younger than RESTING (0.2 + 0.7 < 1: the rotation that
# starts right after a full read ends before any of its records is a whole period old)
ROTATION = 0.7
RESTING = 0.2


@dataclass
class NarrowCache:
    """What the narrow reads between two full reads stand on: the full read's records (``at``),
    the narrow fingerprints seen just before it, the last narrow read's lines, and when each
    job's record was read (``read_at``: the full read, or a later read of it by id)."""

    at: float
    full: dict[str, SqueueJob]
    fingerprints: dict[str, tuple[str, ...]]
    lines: dict[str, tuple[str, SqueueJob]]
    read_at: dict[str, float] = field(default_factory=dict)
    asked_at: float | None = None  # when :meth:`due` was last asked (its pace)
    owed: float = 0.0  # records due by the pace, not yet read (a fraction of one, carried)

    @classmethod
    def after_full_read(cls, now: float, rows: list[NarrowRow], jobs: list[SqueueJob]) -> NarrowCache:
        """From a full read ``jobs`` and the narrow ``rows`` read just before it (a job that
        changed in between differs from its fingerprint next time: one more full read, never a
        missed change)."""
        full = {j.job_id: j for j in jobs}
        return cls(now, full, {r.job_id: r.fingerprint for r in rows},
                   {r.job_id: (r.line, full[r.job_id]) for r in rows if r.job_id in full},
                   dict.fromkeys(full, now))

    def oldest(self, rows: list[NarrowRow]) -> float:
        """When the oldest record of a job in ``rows`` was read (the full read's time if none)."""
        read_at = self.read_at
        return min((t for r in rows if (t := read_at.get(r.job_id)) is not None), default=self.at)

    def due(self, rows: list[NarrowRow], now: float, every: float, most: int) -> list[str]:
        """The jobs of ``rows`` whose records are read again by id this cycle, oldest first, so
        that none gets older than ``every`` and no cycle reads every job for it: the queue is
        read in turn once per ``ROTATION`` of ``every`` (this cycle's share: its jobs times the
        seconds since the last cycle asked, over that time; the fractions carried to the next
        cycle), among the records older than ``RESTING`` of ``every``; at most ``most`` (one
        command), the rest owed. Right after a full read nothing is due; the last record of its
        rotation is read at 0.9 ``every``."""
        gap = max(0.0, now - self.asked_at) if self.asked_at is not None else 0.0
        self.asked_at = now
        read_at, rest = self.read_at, now - RESTING * every
        old = [(t, r.job_id) for r in rows if (t := read_at.get(r.job_id)) is not None and t <= rest]
        if not old:
            self.owed = 0.0
            return []
        self.owed = min(self.owed + len(rows) * gap / (ROTATION * every), float(len(old)))
        take = min(int(self.owed), most)
        self.owed -= take
        return list(dict.fromkeys(job_id for _, job_id in heapq.nsmallest(take, old)))

    def stale(self, rows: list[NarrowRow]) -> str:
        """Why ``rows`` need a full read ("" when they do not): an active job that is new, or
        started, resized or requeued since the full read (its GPU indices); a job that was not
        pending is pending again; an ended job the full read never saw (its name: burn-ins).
        A job that ended since is read from its line (state, exit code)."""
        return next(iter(self.stale_jobs(rows).values()), "")

    def stale_jobs(self, rows: list[NarrowRow]) -> dict[str, str]:
        """Every job that makes ``rows`` stale (see :meth:`stale`), with why, in line order."""
        out: dict[str, str] = {}
        for row in rows:
            before = self.fingerprints.get(row.job_id)
            kind = row.kind
            if kind == "pending":
                if before is not None and before[0] != "pending":
                    out[row.job_id] = f"job {row.job_id} is pending again"
            elif kind == "active" and before != row.fingerprint:
                out[row.job_id] = f"job {row.job_id} is new or changed ({row.state})"
            elif kind == "ended" and (before is None or (
                    before[0] != "ended" and row.job_id not in self.full)):
                # never read whole: its name (a burn-in's verdict) is only in the JSON
                out[row.job_id] = f"job {row.job_id} ended unseen ({row.state})"
        return out

    def unseen_pending(self, rows: list[NarrowRow]) -> list[str]:
        """Waiting jobs no full read has seen (submitted since): the narrow form has no name
        for them; not stale (nothing the daemon decides on is missing), but worth a read by id
        where the version honours -j."""
        return [r.job_id for r in rows if r.kind == "pending" and r.job_id not in self.fingerprints]

    def absorb(self, rows: list[NarrowRow], job_ids: list[str], jobs: list[SqueueJob], now: float) -> None:
        """Take a full read of only ``job_ids`` (``squeue --json -j``, where the version honours
        it) at ``now``, parsed into ``jobs``, read just after ``rows``: their records and
        fingerprints replace the full read's, as if it had read them (an id the JSON left out,
        an end the daemon does not act on, leaves the records as that read would)."""
        fresh = {j.job_id: j for j in jobs}
        at = {r.job_id: r for r in rows}
        for job_id in job_ids:
            self.lines.pop(job_id, None)
            if job_id in fresh:
                self.full[job_id] = fresh[job_id]
                self.read_at[job_id] = now
            else:
                self.full.pop(job_id, None)
                self.read_at.pop(job_id, None)
            if job_id in at:
                self.fingerprints[job_id] = at[job_id].fingerprint

    def read(self, rows: list[NarrowRow]) -> tuple[list[SqueueJob], list[str]]:
        jobs, problems = merge(rows, self.lines, self.full)
        by_id = {j.job_id: j for j in jobs}
        self.lines = {r.job_id: (r.line, by_id[r.job_id]) for r in rows if r.job_id in by_id}
        if len(self.fingerprints) > len(rows):  # jobs Slurm no longer lists: forgotten, as the
            listed = {r.job_id for r in rows}  # next full read would (reads by id keep a cache)
            for kept in (self.full, self.fingerprints, self.read_at):
                for job_id in [j for j in kept if j not in listed]:
                    del kept[job_id]
        return jobs, problems


__all__ = ["CARRIED", "FIELDS", "NarrowCache", "NarrowProblem", "NarrowRow", "comments_argv",
           "excluded_argv", "merge", "narrow_argv", "new_mark", "parse_comments", "parse_narrow",
           "raw_record", "with_excluded", "with_progress"]
