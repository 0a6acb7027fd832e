"""Schedules are pinned: every policy, rigid and elastic, decides exactly what it decided when the
files in ``data/`` were written (by the code before the job-vocabulary refactoring, 79038a1).

A failure here means a change altered what some job got and when. If that was the point, say so
in the commit and regenerate (``python -m tests.daemon.sim.schedule_pin [--philly]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from railgang.daemon.sim.traces.philly import default_dir
from tests.daemon.sim.schedule_pin import DATA, dump, philly, synthetic


def _first_difference(expected: dict[str, Any], actual: dict[str, Any]) -> str:
    for run in expected:
        want, got = json.dumps(expected[run], sort_keys=True), json.dumps(actual.get(run), sort_keys=True)
        if want == got:
            continue
        for key in ("jobs", "jobs_sha256", "metrics"):
            if key in expected[run] and expected[run][key] != actual[run].get(key):
                if key == "jobs":
                    pairs = zip(expected[run]["jobs"], actual[run]["jobs"], strict=False)
                    row = next((f"{a} != {b}" for a, b in pairs if a != b), "length")
                    return f"{run}: first different job {row}"
                return f"{run}: {key} differs"
        return f"{run} differs"
    return "extra runs"


def _check(expected_file: Path, actual: dict[str, Any]) -> None:
    expected = json.loads(expected_file.read_text())
    # compare the serialised form: exact floats, and NaN equal to NaN
    assert dump(actual) == dump(expected), _first_difference(expected, actual)


def test_synthetic_trace_schedules_are_unchanged() -> None:
    _check(DATA / "schedules.json", synthetic())


@pytest.mark.slow
def test_philly_slice_schedules_are_unchanged() -> None:
    root = default_dir()
    if not (root / "simulation_throughputs.json").is_file():
        pytest.fail(f"Philly-derived trace not found at {root}: check out ../shared or set "
                    "RAILGANG_PHILLY_DIR (this test must not be skipped)")
    _check(DATA / "philly_schedules.json", philly(root))
