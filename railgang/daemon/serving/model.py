"""Serving deployments as values, and the demand CSV they are read from (issue 19, item 1).

A *deployment* is a set of replicas; each replica is one tensor-parallel group of ``tp`` whole
GPUs that must stay together (the chapter: the serving unit is the TP group, not a GPU). It has
a replica range and a per-replica *switch-in time*: checkpoint the borrowers, stop them, start
the server, load the weights, warm up (the chapter: 5-20 minutes in all). Its *demand* is a step
function: replicas needed from each time on.

The demand file (``railgang serving show``, ``railgang sim --serving``) is CSV with a header;
columns in any order::

    time_s,deployment,replicas,tp[,min_replicas,max_replicas,switch_in_s]

- ``time_s``: seconds from the start of the series (>= 0); ``replicas`` are needed from then on
- ``replicas``: replicas needed (int >= 0); ``tp``: GPUs per replica (int >= 1), the same on
  every row of a deployment
- ``min_replicas``/``max_replicas``/``switch_in_s``: optional, the deployment's (the last value
  given wins); defaults 0, the peak demand, and 900 s

Lines starting with ``#`` are comments. A malformed row is skipped with a warning naming its line
(``strict`` makes it an error); a file with no usable row, no header or a missing column is an
error. Rows need not be sorted.
"""

from __future__ import annotations

import csv
import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from railgang.daemon.sim.traces.model import Problem
from railgang.errors import InputError
from railgang.topology.files import InputProblem, iter_lines

REQUIRED = ("time_s", "deployment", "replicas", "tp")
OPTIONAL = ("min_replicas", "max_replicas", "switch_in_s")
DEFAULT_SWITCH_IN_S = 900.0  # the chapter's 5-20 minutes, a middle value
MAX_SECONDS = 366 * 86400.0 * 5  # five years of demand is more than any forecast uses
MAX_REPLICAS = 100_000
MAX_TP = 64  # a TP group spans at most a few nodes' NVLink domains
MAX_SWITCH_IN_S = 6 * 3600.0
DEMAND_MAX_BYTES = 256 * 2**20


@dataclass(frozen=True, slots=True)
class Deployment:
    """What a serving deployment asks for; its demand is a separate value (:class:`Demand`)."""

    name: str
    tp: int  # GPUs per replica: one TP group, whole GPUs kept together
    min_replicas: int = 0
    max_replicas: int = 0  # the serving pool is sized for this (the static partition)
    switch_in_s: float = DEFAULT_SWITCH_IN_S  # checkpoint + stop + start + load + warm-up

    @property
    def pool_gpus(self) -> int:
        return self.max_replicas * self.tp


@dataclass(frozen=True, slots=True)
class Demand:
    """Replicas a deployment needs over time: a step function through ``points``."""

    deployment: str
    points: tuple[tuple[float, int], ...]  # (time_s, replicas), sorted by time, times distinct

    def at(self, t: float) -> int:
        """Replicas needed at ``t`` (0 before the first point)."""
        i = bisect_right(self.points, (t, MAX_REPLICAS + 1))
        return self.points[i - 1][1] if i else 0

    @property
    def end_s(self) -> float:
        return self.points[-1][0] if self.points else 0.0

    def sampled(self, step_s: float, start: float = 0.0, end: float | None = None) -> list[int]:
        """Replicas needed at ``start``, ``start + step_s``, ... up to ``end`` (exclusive)."""
        stop = self.end_s + step_s if end is None else end
        n = max(0, math.ceil((stop - start) / step_s))
        out, i, pts = [], 0, self.points
        current = 0
        for k in range(n):
            t = start + k * step_s
            while i < len(pts) and pts[i][0] <= t:
                current = pts[i][1]
                i += 1
            out.append(current)
        return out


@dataclass(frozen=True, slots=True)
class ServingSet:
    """The deployments of a demand file, their demand, and the rows skipped."""

    deployments: tuple[Deployment, ...]
    demand: dict[str, Demand]
    problems: tuple[Problem, ...] = ()

    @property
    def pool_gpus(self) -> int:
        return sum(d.pool_gpus for d in self.deployments)


class _Bad(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def _number(raw: str | None, field: str, *, lo: float, hi: float, integer: bool) -> float:
    text = (raw or "").strip()
    if not text:
        raise _Bad(field, "missing value")
    try:
        value = float(int(text)) if integer else float(text)
    except ValueError:
        raise _Bad(field, f"not {'an integer' if integer else 'a number'}: {text[:40]!r}") from None
    if not math.isfinite(value):
        raise _Bad(field, f"not finite: {text[:40]!r}")
    if not lo <= value <= hi:
        raise _Bad(field, f"must be in {lo:g}..{hi:g}, got {text[:40]}")
    return value


@dataclass(frozen=True, slots=True)
class _Row:
    time_s: float
    name: str
    replicas: int
    tp: int
    extra: dict[str, float]
    line: int


def _row(cells: dict[str, str], line: int) -> _Row:
    name = (cells.get("deployment") or "").strip()
    if not name or len(name) > 128 or not name.isprintable():
        raise _Bad("deployment", "missing, longer than 128 characters or not printable")
    t = _number(cells.get("time_s"), "time_s", lo=0, hi=MAX_SECONDS, integer=False)
    replicas = int(_number(cells.get("replicas"), "replicas", lo=0, hi=MAX_REPLICAS, integer=True))
    tp = int(_number(cells.get("tp"), "tp", lo=1, hi=MAX_TP, integer=True))
    extra: dict[str, float] = {}
    for col, hi, integer in (("min_replicas", MAX_REPLICAS, True),
                             ("max_replicas", MAX_REPLICAS, True),
                             ("switch_in_s", MAX_SWITCH_IN_S, False)):
        if (cells.get(col) or "").strip():
            extra[col] = _number(cells[col], col, lo=0, hi=hi, integer=integer)
    return _Row(t, name, replicas, tp, extra, line)


def _rows(lines: Iterable[str], path: str, notes: list[str]) -> Iterator[_Row | Problem]:
    numbered = ((n, line) for n, line in enumerate(lines, start=1)
                if not line.lstrip().startswith("#"))
    line_of = [0]

    def feed() -> Iterator[str]:
        for n, line in numbered:
            line_of[0] = n
            yield line

    reader = csv.reader(feed())
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise InputError("empty file, expected a header row", path=path) from None
    except csv.Error as exc:
        raise InputError(f"unreadable CSV: {exc}", path=path, line=line_of[0]) from exc
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"header lacks column(s) {', '.join(missing)} (required: "
                         f"{', '.join(REQUIRED)})", path=path, line=line_of[0])
    notes.extend(f"ignored unknown column {c[:40]!r}" for c in header
                 if c not in REQUIRED + OPTIONAL)
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield Problem(path, line_of[0], None, f"unreadable CSV: {exc}")
            continue
        if not cells or all(not c.strip() for c in cells):
            continue
        if len(cells) > len(header):
            yield Problem(path, line_of[0], None, f"expected {len(header)} cells, got {len(cells)}")
            continue
        cells += [""] * (len(header) - len(cells))  # trailing optional cells may be left out
        try:
            yield _row(dict(zip(header, cells, strict=True)), line_of[0])
        except _Bad as bad:
            yield Problem(path, line_of[0], bad.field, bad.message)


def parse_demand(lines: Iterable[str], *, path: str = "<csv>", strict: bool = False,
                 notes: list[str] | None = None) -> ServingSet:
    """Deployments and demand from CSV lines (module docstring); see :func:`read_demand`."""
    notes = notes if notes is not None else []
    problems: list[Problem] = []
    tp_of: dict[str, int] = {}
    extra_of: dict[str, dict[str, float]] = {}
    points: dict[str, dict[float, int]] = {}
    for item in _rows(lines, path, notes):
        if isinstance(item, _Row) and tp_of.setdefault(item.name, item.tp) != item.tp:
            item = Problem(path, item.line, "tp", f"deployment {item.name!r} has tp {tp_of[item.name]} "
                           f"on an earlier row, {item.tp} here")
        if isinstance(item, Problem):
            if strict:
                raise InputError(item.message, path=path, line=item.line, field=item.field)
            problems.append(item)
            continue
        points.setdefault(item.name, {})[item.time_s] = item.replicas  # a later row wins
        extra_of.setdefault(item.name, {}).update(item.extra)
    if not points:
        raise InputError("no valid demand rows", path=path)
    deployments, demand = [], {}
    for name in sorted(points):
        series = tuple(sorted(points[name].items()))
        extra = extra_of[name]
        peak = max(r for _, r in series)
        dep = Deployment(name=name, tp=tp_of[name], min_replicas=int(extra.get("min_replicas", 0)),
                         max_replicas=int(extra.get("max_replicas", peak)),
                         switch_in_s=extra.get("switch_in_s", DEFAULT_SWITCH_IN_S))
        if dep.min_replicas > dep.max_replicas:
            raise InputError(f"deployment {name!r}: min_replicas {dep.min_replicas} > "
                             f"max_replicas {dep.max_replicas}", path=path, field="min_replicas")
        deployments.append(dep)
        demand[name] = Demand(name, series)
    return ServingSet(tuple(deployments), demand, tuple(problems))


def read_demand(path: Path, *, strict: bool = False,
                notes: list[str] | None = None) -> ServingSet:
    """Read a demand file, streamed and bounded (binary, /dev/zero, huge lines: one error)."""
    lines = (line + "\n" for _, line in iter_lines(path, "serving demand",
                                                   max_bytes=DEMAND_MAX_BYTES))
    try:
        return parse_demand(lines, path=str(path), strict=strict, notes=notes)
    except InputProblem as exc:
        raise InputError(exc.message, path=exc.path, line=exc.line, field=exc.field) from exc


__all__ = ["DEFAULT_SWITCH_IN_S", "Demand", "Deployment", "ServingSet", "parse_demand",
           "read_demand"]
