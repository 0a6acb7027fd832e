"""The generic CSV trace format, so any operator can replay their own history.

Header row required; columns in any order::

    job_id,submit_time,gpus,duration_s[,account,tp,pp,dp,elastic_min,elastic_max,class,model]

- ``submit_time``: seconds from the trace start (float, >= 0)
- ``gpus``: GPUs requested (int >= 1); with ``tp``/``pp``/``dp`` given it must equal tp*pp*dp
- ``duration_s``: run time on ``gpus`` GPUs (float > 0)
- ``elastic_min``/``elastic_max``: elastic range in data-parallel replicas (both or neither)
- ``class``: priority class 0 serving, 1 production, 2 interactive, 3 batch (default 3)

Empty optional cells take the default. Lines starting with ``#`` are comments. A malformed row is
reported with its line number and skipped; ``strict=True`` raises ``InputError`` instead.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator
from pathlib import Path

from railgang.daemon.core.model.job import PriorityClass
from railgang.daemon.sim.traces.model import (
    MAX_TRACE_GPUS,
    MAX_TRACE_SECONDS,
    Item,
    Problem,
    Trace,
    TraceFormat,
    TraceJob,
    collect,
)
from railgang.errors import InputError
from railgang.topology.inputs import InputProblem, iter_lines

REQUIRED = ("job_id", "submit_time", "gpus", "duration_s")
OPTIONAL = ("account", "tp", "pp", "dp", "elastic_min", "elastic_max", "class", "model")


class _Bad(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _float(row: dict[str, str], name: str, *, minimum: float, strict_min: bool) -> float:
    raw = (row.get(name) or "").strip()
    if not raw:
        raise _Bad(name, "missing value")
    try:
        value = float(raw)
    except ValueError:
        raise _Bad(name, f"not a number: {raw!r}") from None
    if not math.isfinite(value):
        raise _Bad(name, f"not finite: {raw!r}")
    if value < minimum or (strict_min and value == minimum):
        raise _Bad(name, f"must be {'>' if strict_min else '>='} {minimum:g}, got {raw}")
    if value > MAX_TRACE_SECONDS:
        raise _Bad(name, f"must be at most {MAX_TRACE_SECONDS:g} s (31 years), got {raw}")
    return value


def _int(row: dict[str, str], name: str, *, default: int | None, lo: int, hi: int | None = None,
         ) -> int | None:
    raw = (row.get(name) or "").strip()
    if not raw:
        if default is None and name in REQUIRED:
            raise _Bad(name, "missing value")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _Bad(name, f"not an integer: {raw!r}") from None
    if value < lo or (hi is not None and value > hi):
        bound = f"in {lo}..{hi}" if hi is not None and hi < 100 else f">= {lo}" if value < lo \
            else f"<= {hi}"
        raise _Bad(name, f"must be {bound}, got {value}")
    return value


def _job(row: dict[str, str]) -> TraceJob:
    job_id = (row.get("job_id") or "").strip()
    if not job_id:
        raise _Bad("job_id", "missing value")
    submit = _float(row, "submit_time", minimum=0.0, strict_min=False)
    gpus = _int(row, "gpus", default=None, lo=1, hi=MAX_TRACE_GPUS)
    assert gpus is not None
    duration = _float(row, "duration_s", minimum=0.0, strict_min=True)
    tp = _int(row, "tp", default=1, lo=1) or 1
    pp = _int(row, "pp", default=1, lo=1) or 1
    dp = _int(row, "dp", default=None, lo=1)
    if dp is not None:
        if tp * pp * dp != gpus:
            raise _Bad("gpus", f"tp*pp*dp = {tp * pp * dp} but gpus = {gpus}")
    elif gpus % (tp * pp):
        raise _Bad("gpus", f"{gpus} GPUs is not a multiple of tp*pp = {tp * pp}")
    emin = _int(row, "elastic_min", default=None, lo=1)
    emax = _int(row, "elastic_max", default=None, lo=1)
    if (emin is None) != (emax is None):
        raise _Bad("elastic_min" if emin is None else "elastic_max",
                   "elastic_min and elastic_max go together")
    if emin is not None and emax is not None and emin > emax:
        raise _Bad("elastic_min", f"elastic_min {emin} > elastic_max {emax}")
    priority_class = _int(row, "class", default=3, lo=0, hi=3)
    account = (row.get("account") or "").strip() or "default"
    return TraceJob(job_id=job_id, submit_time=submit, gpus=gpus, duration_s=duration,
                    account=account, tp=tp, pp=pp, dp=dp, elastic_min=emin, elastic_max=emax,
                    priority_class=PriorityClass(3 if priority_class is None else priority_class), model=(row.get("model") or "").strip())


def parse_csv(lines: Iterable[str], *, path: str = "<csv>", strict: bool = False,
              limit: int | None = None) -> Trace:
    """Parse CSV text (an iterable of lines, e.g. an open file); with ``limit``, only the first
    ``limit`` jobs by submit time, reading no further than that needs (``model.collect``)."""
    notes: list[str] = []
    jobs, problems = collect([_items(lines, path, strict, notes)], limit=limit,
                             key=lambda job, n: (job.submit_time, n))
    return Trace(jobs=tuple(jobs), problems=tuple(problems), notes=tuple(notes))


def _items(lines: Iterable[str], path: str, strict: bool, notes: list[str]) -> Iterator[Item]:
    """Jobs and problems in file order (``strict``: the first problem raises instead)."""
    numbered = ((n, line) for n, line in enumerate(lines, start=1))
    content = ((n, line) for n, line in numbered if not line.lstrip().startswith("#"))
    # keep the physical line number of every row the csv module sees
    line_of: list[int] = []

    def feed() -> Iterable[str]:
        for n, line in content:
            line_of[:] = [n]  # only the latest: a long trace must not grow a list
            yield line

    reader = csv.reader(feed())
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty file, expected a header row", path=path) from None
    except csv.Error as exc:
        raise InputError(f"unreadable CSV: {exc}", path=path, line=line_of[-1]) from exc
    names = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise InputError(f"header lacks column(s) {', '.join(missing)} "
                         f"(required: {', '.join(REQUIRED)})", path=path, line=line_of[0])
    notes.extend(f"ignored unknown column {c!r}" for c in names if c not in REQUIRED + OPTIONAL)
    seen: set[str] = set()
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problem = Problem(path, line_of[-1], None, f"unreadable CSV: {exc}")
        else:
            lineno = line_of[-1]
            if not cells or all(not c.strip() for c in cells):
                continue
            if len(cells) != len(names):
                problem = Problem(path, lineno, None,
                                  f"expected {len(names)} cells, got {len(cells)}")
            else:
                try:
                    job = _job(dict(zip(names, cells, strict=True)))
                except _Bad as bad:
                    problem = Problem(path, lineno, bad.field, bad.message)
                else:
                    if job.job_id in seen:
                        problem = Problem(path, lineno, "job_id",
                                          f"duplicate job_id {job.job_id!r}")
                    else:
                        seen.add(job.job_id)
                        yield job
                        continue
        if strict:
            raise InputError(problem.message, path=problem.path, line=problem.line,
                             field=problem.field)
        yield problem


# Streamed line by line (``files.iter_lines``): a row longer than 64 KiB (binary) is refused at
# once, the whole file is capped well above the largest public GPU traces (Helios, PAI: tens to a
# few hundred MB as CSV), and with ``--limit`` reading stops once the first N jobs are known.
TRACE_MAX_BYTES = 1024 * 2**20


def read_csv(path: Path, *, strict: bool = False, limit: int | None = None) -> Trace:
    lines = (line + "\n" for _, line in iter_lines(path, "trace", max_bytes=TRACE_MAX_BYTES))
    try:
        return parse_csv(lines, path=str(path), strict=strict, limit=limit)
    except InputProblem as exc:
        raise InputError(exc.message, path=exc.path, line=exc.line, field=exc.field) from exc


FORMAT = TraceFormat(
    name="csv",
    summary="one job per row: job_id, submit_time, gpus, duration_s[, account, tp, pp, dp, ...]",
    read=read_csv,
    claims=lambda path: path.suffix.lower() == ".csv",
)

__all__ = ["FORMAT", "OPTIONAL", "REQUIRED", "TRACE_MAX_BYTES", "parse_csv", "read_csv"]
