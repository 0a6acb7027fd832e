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

The daemon reads its files with tighter bounds than the commands (``DAEMON_*``, docs/serving.md):
only the deployments it has pools for (``only``: the rows of the others are skipped before a
value is built for them), at most ``DAEMON_MAX_ROWS`` rows each, ``DAEMON_DEMAND_MAX_BYTES`` in
all, within ``timeout_s``.
"""

from __future__ import annotations

import csv
import io
import math
import os
import stat
import time
from bisect import bisect_right
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from railgang.daemon.sim.traces.model import Problem
from railgang.errors import InputError
from railgang.topology.files import InputProblem, decode, iter_lines, read_bytes, too_big

REQUIRED = ("time_s", "deployment", "replicas", "tp")
OPTIONAL = ("min_replicas", "max_replicas", "switch_in_s")
DEFAULT_SWITCH_IN_S = 900.0  # the chapter's 5-20 minutes, a middle value
MAX_SECONDS = 366 * 86400.0 * 5  # five years of demand is more than any forecast uses
MAX_REPLICAS = 100_000
MAX_TP = 64  # a TP group spans at most a few nodes' NVLink domains
MAX_SWITCH_IN_S = 6 * 3600.0
DEMAND_MAX_BYTES = 256 * 2**20  # the commands' bound (years of synthetic demand for `sim`)
# The daemon's: what `serving fetch` writes for its 32 series of 11,000 points (~12 MB when every
# point is a change; a row per change is usually far fewer), with room; and per deployment 34
# days of one-minute rows, or 520 days of 15-minute ones (its own fit reads 28 days)
DAEMON_DEMAND_MAX_BYTES = 16 * 2**20
DAEMON_MAX_ROWS = 50_000
MAX_OTHERS = 32  # names of skipped deployments kept for an error message
_CLOCK_EVERY = 1024  # lines between two looks at the clock


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
    others: tuple[str, ...] = ()  # with ``only``: deployments skipped (at most MAX_OTHERS)

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


def _rows(lines: Iterable[str], path: str, notes: list[str], only: Collection[str] | None,
          others: set[str], timeout_s: float | None) -> Iterator[_Row | Problem]:
    numbered = ((n, line) for n, line in enumerate(lines, start=1)
                if not line.lstrip().startswith("#"))
    line_of = [0]
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def feed() -> Iterator[str]:
        for n, line in numbered:
            line_of[0] = n
            if deadline is not None and n % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
                raise InputError(f"not read within {timeout_s:g} s; refusing it (a file this "
                                 "slow to read is too large or on a stalled file system)",
                                 path=path, line=n)
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
    at = header.index("deployment")
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
        if only is not None:  # another deployment's row: no value is built for it
            name = cells[at].strip() if at < len(cells) else ""
            if name not in only:
                if len(others) < MAX_OTHERS and name:
                    others.add(name[:40])
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
                 notes: list[str] | None = None, only: Collection[str] | None = None,
                 max_rows: int | None = None, timeout_s: float | None = None) -> ServingSet:
    """Deployments and demand from CSV lines (module docstring); see :func:`read_demand`.

    ``only``: the deployments wanted, the others' rows skipped (a file with rows of none of them
    is an error only when it names no other either); ``max_rows``: at most this many rows of one
    deployment; ``timeout_s``: the parse gives up, with an error, after this long."""
    notes = notes if notes is not None else []
    problems: list[Problem] = []
    tp_of: dict[str, int] = {}
    extra_of: dict[str, dict[str, float]] = {}
    points: dict[str, dict[float, int]] = {}
    rows: dict[str, int] = {}
    others: set[str] = set()
    for item in _rows(lines, path, notes, only, others, timeout_s):
        if isinstance(item, _Row) and tp_of.setdefault(item.name, item.tp) != item.tp:
            item = Problem(path, item.line, "tp", f"deployment {item.name!r} has tp {tp_of[item.name]} "
                           f"on an earlier row, {item.tp} here")
        if isinstance(item, Problem):
            if strict:
                raise InputError(item.message, path=path, line=item.line, field=item.field)
            problems.append(item)
            continue
        if max_rows is not None:
            rows[item.name] = rows.get(item.name, 0) + 1
            if rows[item.name] > max_rows:
                raise InputError(f"deployment {item.name!r} has more than {max_rows:,} rows; "
                                 "refusing the file (a longer step, or fewer days)", path=path,
                                 line=item.line)
        points.setdefault(item.name, {})[item.time_s] = item.replicas  # a later row wins
        extra_of.setdefault(item.name, {}).update(item.extra)
    if not points and not others:
        raise InputError("no valid demand rows" + (f" of {', '.join(sorted(only))}" if only else ""),
                         path=path)
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
    return ServingSet(tuple(deployments), demand, tuple(problems), tuple(sorted(others)))


def _in_one_read(path: Path, max_bytes: int) -> Iterator[str]:
    """The file's lines from one bounded read, each decoded as it comes (one copy of the file
    held, not three: a str and a StringIO of it took a 15 MB file to 150 MB)."""
    data = read_bytes(path, "serving demand", max_bytes)
    for number, raw in enumerate(io.BytesIO(data), start=1):
        yield decode(raw, "serving demand", str(path), number)


def read_demand(path: Path, *, strict: bool = False, notes: list[str] | None = None,
                only: Collection[str] | None = None, max_bytes: int = DEMAND_MAX_BYTES,
                max_rows: int | None = None, timeout_s: float | None = None,
                whole: bool = False) -> ServingSet:
    """Read a demand file, streamed and bounded (binary, /dev/zero, huge lines: one error); the
    keywords after ``notes`` are :func:`parse_demand`'s and the bound in bytes.

    ``whole``: in one read of at most ``max_bytes``, not line by line, for a reader in a thread
    beside the daemon's cycle: a thread that reads line by line lets go of the GIL at every
    buffer it refills and takes it straight back, and the cycle's thread, waiting for it, starved
    (0.4-1.6 s stalls measured on a 15 MB file; the GIL's convoy effect)."""
    try:  # a regular file over the bound is refused before a line of it is read
        st: os.stat_result | None = os.stat(path)
    except OSError:
        st = None  # the reader below says what is wrong with it
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > max_bytes:
        raise InputError(too_big("serving demand", max_bytes), path=str(path))
    try:
        lines: Iterable[str] = (
            _in_one_read(path, max_bytes) if whole else
            (line + "\n" for _, line in iter_lines(path, "serving demand", max_bytes=max_bytes)))
        return parse_demand(lines, path=str(path), strict=strict, notes=notes, only=only,
                            max_rows=max_rows, timeout_s=timeout_s)
    except InputProblem as exc:
        raise InputError(exc.message, path=exc.path, line=exc.line, field=exc.field) from exc


__all__ = ["DAEMON_DEMAND_MAX_BYTES", "DAEMON_MAX_ROWS", "DEFAULT_SWITCH_IN_S", "Demand",
           "Deployment", "ServingSet", "parse_demand", "read_demand"]
