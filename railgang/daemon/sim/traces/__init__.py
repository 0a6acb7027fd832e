"""Trace formats and their registry (like the policies': adding a format is adding one file).

Every module in this package that defines ``FORMAT`` (a :class:`~.model.TraceFormat`) is a
format: ``names()`` lists them, ``get(name)`` returns one, :func:`read_trace` reads a path with the
named format or with the first one (by name) that claims the path. ``railgang sim --format``
takes its choices from ``names()``.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path

from railgang.daemon.sim.traces.csv_trace import parse_csv, read_csv
from railgang.daemon.sim.traces.model import Problem, Trace, TraceFormat, TraceJob
from railgang.daemon.sim.traces.philly import read_philly
from railgang.errors import InputError


@cache
def _discover() -> dict[str, TraceFormat]:
    found: dict[str, TraceFormat] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        fmt = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FORMAT", None)
        if isinstance(fmt, TraceFormat):
            found[fmt.name] = fmt
    return dict(sorted(found.items()))


def names() -> tuple[str, ...]:
    """Registered format names, sorted."""
    return tuple(_discover())


def get(name: str) -> TraceFormat:
    """The format ``name`` (raises ``KeyError`` if unknown)."""
    formats = _discover()
    if name not in formats:
        raise KeyError(f"unknown trace format {name!r}; known: {', '.join(formats)}")
    return formats[name]


def guess_format(path: Path) -> TraceFormat:
    """The first format (by name) that claims ``path``."""
    for fmt in _discover().values():
        if fmt.claims(path):
            return fmt
    raise InputError(f"cannot tell the trace format; pass --format {'|'.join(names())}",
                     path=str(path))


def read_trace(path: Path, fmt: str | None = None, *, strict: bool = False,
               limit: int | None = None) -> Trace:
    """Read ``path`` with format ``fmt`` (a registered name), or the format that claims it; with
    ``limit``, only the first ``limit`` jobs by submit time, streamed (``model.collect``)."""
    if fmt is None:
        return guess_format(path).read(path, strict=strict, limit=limit)
    try:
        reader = get(fmt)
    except KeyError as exc:
        raise InputError(str(exc.args[0]), path=str(path)) from exc
    return reader.read(path, strict=strict, limit=limit)


__all__ = ["Problem", "Trace", "TraceFormat", "TraceJob", "get", "guess_format", "names",
           "parse_csv", "read_csv", "read_philly", "read_trace"]
