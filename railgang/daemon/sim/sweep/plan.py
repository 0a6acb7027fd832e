"""A grid made concrete: every point with its key, command line and input hashes, as one JSON file
the local runner and each Slurm array task read (``plans/<sha>.json``, content-addressed, so a
job array still queued reads the plan it was submitted with after the grid file changes)."""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from railgang.daemon.sim.sweep.grid import Grid, Value, points, sim_options, to_argv
from railgang.daemon.sim.sweep.store import (
    PLAN_FORMAT,
    Store,
    git_revision,
    input_hash,
    point_key,
    read_json,
    write_atomic,
)
from railgang.errors import InputError


@dataclass(frozen=True)
class PlannedPoint:
    index: int
    key: str
    labels: dict[str, str]
    options: dict[str, Value]
    inputs: dict[str, str]  # option -> sha256 of the file (or directory) it names
    argv: list[str]  # the sim's options, without --json --quiet


@dataclass(frozen=True)
class Plan:
    grid: str
    name: str
    axes: list[str]
    goals: list[str]
    timeout_s: float | None
    git: str
    python: str
    points: list[PlannedPoint]

    def to_json(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, **asdict(self)}


def make_plan(grid: Grid) -> Plan:
    """Hash every input once (a trace named by many points is read once) and key each point."""
    kinds = sim_options()
    hashes: dict[str, str] = {}
    planned = []
    for point in points(grid):
        inputs = {}
        for key, value in point.options.items():
            if kinds[key].kind is Path and isinstance(value, str):
                if value not in hashes:
                    hashes[value] = input_hash(Path(value), key)
                inputs[key] = hashes[value]
        # the identity: options with input files by content; not the labels (a renamed cluster
        # shape is the same replay), not timeouts or where it runs; the code is checked apart
        # (store.py: the files the replay loaded)
        identity = {"options": {k: inputs.get(k, v) for k, v in point.options.items()},
                    "format": 2}
        planned.append(PlannedPoint(point.index, point_key(identity), point.labels,
                                    point.options, inputs, to_argv(point.options)))
    return Plan(str(grid.path), grid.name, [a.name for a in grid.axes], list(grid.goals),
                grid.timeout_s, git_revision(), platform.python_version(), planned)


def save_plan(plan: Plan, store: Store) -> Path:
    data = plan.to_json()
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    path = store.plan_path(digest)
    if not path.exists():
        write_atomic(path, data)
    return path


def load_plan(path: Path) -> Plan:
    data = read_json(path, "sweep plan")
    if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
        raise InputError(f"not a sweep plan of format {PLAN_FORMAT}", path=str(path))
    fields = {k: v for k, v in data.items() if k != "format"}
    try:
        fields["points"] = [PlannedPoint(**p) for p in fields["points"]]
        return Plan(**fields)
    except (TypeError, KeyError) as exc:
        raise InputError(f"malformed sweep plan: {exc}", path=str(path)) from exc


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


__all__ = ["Plan", "PlannedPoint", "load_plan", "make_plan", "now_iso", "save_plan"]
