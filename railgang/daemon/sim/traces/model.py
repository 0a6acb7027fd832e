"""What a trace reader yields — one ``TraceJob`` per submitted job, plus the problems it skipped —
and what a trace format is (:class:`TraceFormat`, the registry's unit).

A trace job is a *request*, not a schedule: when it arrived, how many GPUs it asks for and how long
it runs on exactly that many GPUs with an ideal (single-leaf) placement. The simulator derives every
other allocation's speed from ``duration_s`` through the job's scaling curve (see
``daemon/sim/progress.py``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from railgang.daemon.core.model.job import PriorityClass
from railgang.errors import InputError


@dataclass(frozen=True, slots=True)
class TraceJob:
    job_id: str
    submit_time: float  # seconds from the start of the trace
    gpus: int  # GPUs requested (= tp * pp * dp when those are given)
    duration_s: float  # run time on `gpus` GPUs, ideal placement, never preempted
    account: str = "default"
    tp: int = 1
    pp: int = 1
    dp: int | None = None  # None = derive from gpus / (tp * pp), as a tag without a parallel hint
    elastic_min: int | None = None  # in DP replicas; None = rigid
    elastic_max: int | None = None
    priority_class: PriorityClass = PriorityClass.BATCH  # DESIGN R-S7; traces default to batch
    model: str = ""
    # measured throughput (steps/s) per GPU count when the trace knows it (philly-gavel); the
    # simulator's scaling curve interpolates it, otherwise it falls back to a generic curve
    throughput_by_gpus: Mapping[int, float] = field(default_factory=dict)
    # speed on each GPU type relative to the type ``duration_s`` was measured on (philly-gavel:
    # K80/P100/V100 throughput ratios at the job's size); empty = unknown (table fallback)
    type_rates: Mapping[str, float] = field(default_factory=dict)
    time_limit_s: float | None = None  # the user's wall-clock limit (Slurm --time); None = none
    serving: str = ""  # a class-0 replica of this serving deployment (``sim --serving`` adds them)

    @property
    def replicas(self) -> int:
        """Data-parallel degree the job asks for."""
        return self.dp if self.dp is not None else max(1, self.gpus // (self.tp * self.pp))


@dataclass(frozen=True, slots=True)
class Problem:
    """A malformed input row that was skipped (``--strict`` turns the first one into an error)."""

    path: str
    line: int
    field: str | None
    message: str

    def render(self) -> str:
        field = f"{self.field}: " if self.field else ""
        return f"{self.path}:{self.line}: {field}{self.message}"


@dataclass(frozen=True, slots=True)
class Trace:
    jobs: tuple[TraceJob, ...]
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()  # how derived values were obtained (e.g. missing throughputs)


Item = TraceJob | Problem  # what a streaming reader yields, in file order
# A submit time or run time past this (31 years) is a typo or a hostile file, not a trace: the
# replay would step through it (1e300 s hung `railgang sim`), so readers skip such rows.
MAX_TRACE_SECONDS = 1e9
MAX_TRACE_GPUS = 1_000_000
# a file whose first this-many rows are all malformed is not a trace (a 50 MB log given by
# mistake would otherwise become a million skipped-row records)
MAX_LEADING_PROBLEMS = 1000


def collect(streams: Iterable[Iterator[Item]], *, limit: int | None,
            key: Callable[[TraceJob, int], tuple[Any, ...]]) -> tuple[list[TraceJob], list[Problem]]:
    """The jobs of ``streams`` in ``key`` order (``key(job, n)``, ``n`` the job's place in the
    merged stream) and the problems met; with ``limit``, only the first ``limit`` jobs.

    With a limit, memory holds about ``2 * limit`` jobs, and reading stops as soon as no row still
    unread can come among the first ``limit``: traces list jobs in submit order (each file of a
    directory is merged by submit time), so once ``limit`` jobs are in, the first job with a later
    submit time ends the read (ties are all kept, then ``key`` decides). A row met out of submit
    order turns the early stop off and the whole trace is read (still holding ``2 * limit``); a
    row out of order *after* the stop is not seen, which is what reading a sorted log means.
    """
    problems: list[Problem] = []
    in_order = True

    jobs_seen = 0

    def checked(stream: Iterator[Item]) -> Iterator[TraceJob]:
        nonlocal in_order, jobs_seen
        last = -math.inf
        for item in stream:
            if isinstance(item, Problem):
                problems.append(item)
                if jobs_seen == 0 and len(problems) >= MAX_LEADING_PROBLEMS:
                    raise InputError(f"the first {MAX_LEADING_PROBLEMS} rows are all malformed "
                                     f"(first: {problems[0].render()}): not a trace of this "
                                     "format", path=item.path)
                continue
            jobs_seen += 1
            in_order = in_order and item.submit_time >= last
            last = item.submit_time
            yield item

    merged = heapq.merge(*(checked(s) for s in streams), key=lambda j: j.submit_time)
    if limit is None:
        jobs = [(key(job, n), job) for n, job in enumerate(merged)]
        jobs.sort(key=lambda kj: kj[0])
        return [job for _, job in jobs], problems
    best: list[tuple[tuple[Any, ...], TraceJob]] = []
    cutoff: float | None = None  # submit time of the limit-th job met while all was in order
    for n, job in enumerate(merged):
        if cutoff is not None and in_order and job.submit_time > cutoff:
            break
        best.append((key(job, n), job))
        if cutoff is None and in_order and n + 1 == limit:
            cutoff = job.submit_time
        if len(best) > 2 * limit:
            best.sort(key=lambda kj: kj[0])
            del best[limit:]
    best.sort(key=lambda kj: kj[0])
    return [job for _, job in best[:limit]], problems


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """One trace format: a module in ``daemon/sim/traces/`` that defines ``FORMAT = TraceFormat(...)``
    is found by the registry (``traces.names()``, ``railgang sim --format``); nothing else to edit."""

    name: str  # what --format accepts
    summary: str  # one line for --help and the docs
    read: Callable[..., Trace]  # read(path, *, strict=False, limit=None) -> Trace (see collect)
    claims: Callable[[Path], bool]  # whether a path looks like this format (--format left out)


__all__ = ["MAX_LEADING_PROBLEMS", "MAX_TRACE_GPUS", "MAX_TRACE_SECONDS", "Item", "Problem", "Trace", "TraceFormat", "TraceJob", "collect"]
