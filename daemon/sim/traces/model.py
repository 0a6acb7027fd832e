"""What a trace reader yields — one ``TraceJob`` per submitted job, plus the problems it skipped —
and what a trace format is (:class:`TraceFormat`, the registry's unit).

A trace job is a *request*, not a schedule: when it arrived, how many GPUs it asks for and how long
it runs on exactly that many GPUs with an ideal (single-leaf) placement. The simulator derives every
other allocation's speed from ``duration_s`` through the job's scaling curve (see
``daemon/sim/progress.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class TraceJob:
    job_id: str
    submit_time: float  # seconds from the start of the trace
    gpus: int  # GPUs requested (= tp * pp * dp when those are given)
    duration_s: float  # run time on `gpus` GPUs, ideal placement, never preempted
    account: str = "default"
    tp: int = 1
    pp: int = 1
    dp: int = 0  # 0 = derive from gpus / (tp * pp)
    elastic_min: int | None = None  # in DP replicas; None = rigid
    elastic_max: int | None = None
    klass: int = 3  # priority class 0..3 (DESIGN R-S7); traces default to batch/research
    model: str = ""
    # measured throughput (steps/s) per GPU count when the trace knows it (philly-gavel); the
    # simulator's scaling curve interpolates it, otherwise it falls back to a generic curve
    throughput_by_gpus: Mapping[int, float] = field(default_factory=dict)
    # speed on each GPU type relative to the type ``duration_s`` was measured on (philly-gavel:
    # K80/P100/V100 throughput ratios at the job's size); empty = unknown (table fallback)
    type_rates: Mapping[str, float] = field(default_factory=dict)
    time_limit_s: float | None = None  # the user's wall-clock limit (Slurm --time); None = none

    @property
    def replicas(self) -> int:
        """Data-parallel degree the job asks for."""
        return self.dp if self.dp > 0 else max(1, self.gpus // (self.tp * self.pp))


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


@dataclass(frozen=True, slots=True)
class TraceFormat:
    """One trace format: a module in ``daemon/sim/traces/`` that defines ``FORMAT = TraceFormat(...)``
    is found by the registry (``traces.names()``, ``railgang sim --format``); nothing else to edit."""

    name: str  # what --format accepts
    summary: str  # one line for --help and the docs
    read: Callable[..., Trace]  # read(path, *, strict=False) -> Trace
    claims: Callable[[Path], bool]  # whether a path looks like this format (--format left out)


__all__ = ["Problem", "Trace", "TraceFormat", "TraceJob"]
