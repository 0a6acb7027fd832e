"""Trace readers: the Philly-derived Gavel traces and the generic CSV format."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from railgang.daemon.errors import InputError
from railgang.daemon.sim.traces.csv_trace import parse_csv, read_csv
from railgang.daemon.sim.traces.model import Problem, Trace, TraceJob
from railgang.daemon.sim.traces.philly import read_philly

Format = Literal["philly-gavel", "csv"]


def guess_format(path: Path) -> Format:
    """``csv`` for ``*.csv`` files, ``philly-gavel`` for directories and ``*.trace`` files."""
    if path.is_dir() or path.suffix == ".trace":
        return "philly-gavel"
    if path.suffix.lower() == ".csv":
        return "csv"
    raise InputError("cannot tell the trace format; pass --format philly-gavel|csv", path=str(path))


def read_trace(path: Path, fmt: Format | None = None, *, strict: bool = False) -> Trace:
    fmt = fmt or guess_format(path)
    if fmt == "csv":
        return read_csv(path, strict=strict)
    return read_philly(path, strict=strict)


__all__ = ["Format", "Problem", "Trace", "TraceJob", "guess_format", "parse_csv", "read_csv",
           "read_philly", "read_trace"]
