"""Trace formats register like policies: one module with ``FORMAT`` is one format."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

from railgang.daemon.sim import traces
from railgang.daemon.sim.traces.model import TraceFormat
from railgang.errors import InputError


def test_every_module_with_a_format_is_registered_under_its_name() -> None:
    found = {}
    for info in pkgutil.iter_modules(traces.__path__):
        fmt = getattr(importlib.import_module(f"{traces.__name__}.{info.name}"), "FORMAT", None)
        if fmt is not None:
            assert isinstance(fmt, TraceFormat), info.name
            found[fmt.name] = fmt
    assert found and traces.names() == tuple(sorted(found))
    assert all(traces.get(name) is fmt for name, fmt in found.items())


@pytest.mark.parametrize(
    ("name", "expected"),
    [("history.csv", "csv"), ("HISTORY.CSV", "csv"), ("vc.trace", "philly-gavel")],
    ids=["csv", "csv-upper", "trace-file"],
)
def test_the_format_that_claims_a_path_reads_it(name: str, expected: str) -> None:
    assert traces.guess_format(Path(name)).name == expected


def test_a_directory_is_a_philly_trace(tmp_path: Path) -> None:
    assert traces.guess_format(tmp_path).name == "philly-gavel"


def test_unknown_or_unclaimed_formats_are_one_line_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"--format csv\|philly-gavel"):
        traces.read_trace(tmp_path / "jobs.xml")
    with pytest.raises(InputError, match="unknown trace format 'xml'"):
        traces.read_trace(tmp_path / "jobs.csv", "xml")
    with pytest.raises(KeyError):
        traces.get("xml")
