"""The grid of a sweep: a small TOML file read into points, each one ``railgang sim`` command line.

```toml
[sweep]                      # optional
goals = ["mean_jct_s", "p99_jct_s", "util_allocated"]  # what the plots show (default: GOALS[:6])
timeout_s = 3600             # per point; a point over it is killed and counts as failed

[fixed]                      # sim options every point gets
trace = "traces/day.csv"     # paths are relative to this file
limit = 2000

[grid]                       # one axis per key; the points are the product of the axes
policy = ["fifo", "default"]
cycle-s = [0, 60]

[[grid.cluster]]             # a list of tables: options that vary together (one axis, "cluster")
name = "64x8"
nodes = 64
gpus-per-node = 8
```

Keys are the sim's own options without ``--`` (``gpus-per-node``, ``gpu-pools``; ``_`` may stand
for ``-``), values are what the option takes: a bool for a flag (``elastic = true``), a number
or a string otherwise. Every value is checked by the sim's own parser (types, ranges, policy and
format names) before anything runs, so a typo fails here, in one line, and not in point 37 an
hour later. The file itself is hostile input: read bounded (regular files only, UTF-8, no NUL,
no ``inf``/``nan``), and the size of the product is checked before it is built.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from railgang.daemon.inputs import read_toml
from railgang.errors import InputError

GRID_MAX_BYTES = 1 * 2**20  # a grid is a few lines; a megabyte is a mistake (or /dev/zero)
MAX_POINTS = 10_000  # a sweep of more points is a mistake at 1-60 CPU minutes each
MAX_VALUES = 1_000  # values of one axis
MAX_STRING = 4_096  # one value (a path, a --degrade spec)
# The metrics a point's sim --json reports (numbers), then the sweep's own timings: what a goal
# may name. The first six are plotted when [sweep] names no goals.
GOALS = ("mean_jct_s", "p99_jct_s", "mean_queueing_s", "makespan_s", "util_allocated",
         "rho_max", "median_jct_s", "p95_jct_s", "median_queueing_s", "p99_queueing_s",
         "util_productive", "rho_mean", "rho_share_above_2", "preemptions", "resizes",
         "gpu_hours_lost_to_preemption", "jobs", "finished", "rejected", "unfinished", "cycles",
         "events", "wall_s", "cpu_s")
# options the sweep sets itself (--json, --quiet), that write elsewhere, or that run several
# policies in one point (--compare: a grid axis "policy" does that, one point per policy)
RESERVED = {"json": "the sweep reads each point's --json itself",
            "quiet": "points never draw a progress bar",
            "compare": "give policy = [...] in [grid]: one point per policy",
            "jobs-csv": "a point writes only its result", "ledger": "a point writes only its result",
            "ledger-start": "a point writes only its result",
            "telemetry-interval-s": "a point writes only its result",
            "yes": "a point writes only its result",
            "gpus": "it is --gpu-pools", "install-completion": "not a sim option",
            "show-completion": "not a sim option", "help": "not a sim option"}
_TABLES = {"sweep": {"goals", "timeout_s", "name"}, "fixed": None, "grid": None}
_AXIS_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

Value = bool | int | float | str
_KINDS = (bool, int, float, str, Path)


@dataclass(frozen=True)
class Option:
    """One option of ``railgang sim``: its key (the flag without ``--``) and the Python type of
    its value (bool for a flag; Path for a file the point reads, hashed as an input)."""

    key: str
    kind: type


@dataclass(frozen=True)
class Axis:
    """One dimension of the grid: a label per value and the options each value sets."""

    name: str
    labels: tuple[str, ...]
    settings: tuple[dict[str, Value], ...]


@dataclass(frozen=True)
class Grid:
    path: Path
    name: str
    fixed: dict[str, Value]
    axes: tuple[Axis, ...]
    goals: tuple[str, ...]
    timeout_s: float | None

    @property
    def size(self) -> int:
        return math.prod(len(a.labels) for a in self.axes)


@dataclass(frozen=True)
class Point:
    """One replay: its place in the grid, the label of each axis, and the sim options it runs
    with (paths absolute)."""

    index: int
    labels: dict[str, str]
    options: dict[str, Value]


@cache
def sim_command() -> Any:
    """``railgang sim`` as a click command, to list its options and parse values with them."""
    import typer

    from railgang.daemon.sim.cli import sim

    one = typer.Typer()
    one.command("sim")(sim)
    return typer.main.get_command(one)


def sim_options() -> dict[str, Option]:
    out = {}
    for param in sim_command().params:
        flag = next((o for o in param.opts if o.startswith("--")), None)
        if flag is None or param.hidden:
            continue
        key = flag[2:]
        kind = param.type_descriptor.annotation  # typer's own: Optional unwrapped
        if key not in RESERVED:
            out[key] = Option(key, bool if param.is_flag else kind if kind in _KINDS else str)
    return out


def to_argv(options: dict[str, Value]) -> list[str]:
    """The sim command line of ``options`` (a flag set to false is left out)."""
    argv: list[str] = []
    for key, value in options.items():
        if value is True:
            argv.append(f"--{key}")
        elif value is not False:
            argv += [f"--{key}", value if isinstance(value, str) else repr(value)]
    return argv


def label(value: Value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


class _Reader:
    """Checks of one grid file; every problem is one InputError naming the file and the key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.options = sim_options()

    def fail(self, field: str, message: str) -> InputError:
        return InputError(message, path=str(self.path), field=field)

    def key(self, raw: str, where: str) -> str:
        key = raw.replace("_", "-")
        if key in RESERVED:
            return self._reserved(key, where)
        if key not in self.options:
            raise self.fail(where, f"'{raw}' is not an option of railgang sim (known: "
                                   f"{', '.join(sorted(self.options))})")
        return key

    def _reserved(self, key: str, where: str) -> str:
        raise self.fail(where, f"'{key}' cannot be set in a sweep: {RESERVED[key]}")

    def value(self, key: str, raw: Any, where: str) -> Value:
        kind = self.options[key].kind
        ok = (isinstance(raw, bool) if kind is bool
              else isinstance(raw, int) and not isinstance(raw, bool) if kind is int
              else isinstance(raw, int | float) and not isinstance(raw, bool) if kind is float
              else isinstance(raw, str))
        if not ok:
            want = {bool: "true or false", int: "an integer", float: "a number"}.get(kind, "a string")
            raise self.fail(where, f"must be {want}, not {type(raw).__name__} {raw!r:.60}")
        if isinstance(raw, str):
            if not raw or len(raw) > MAX_STRING or _CONTROL.search(raw):
                raise self.fail(where, f"must be a non-empty string of at most {MAX_STRING} "
                                       "characters without control characters")
            if kind is Path:
                raw = str((self.path.parent / raw).resolve())
        value: Value = raw
        self.check_with_sim(key, value, where)
        return value

    def check_with_sim(self, key: str, value: Value, where: str) -> None:
        """The sim's own parser on this one value: its types, ranges and name registries."""
        from typer._click.exceptions import ClickException  # typer 0.29 vendors click

        argv = [] if key == "trace" else ["--trace", "-"]
        try:
            sim_command().make_context("sim", [*argv, *to_argv({key: value})])
        except ClickException as exc:
            raise self.fail(where, " ".join(exc.format_message().split())) from exc

    def table(self, raw: dict[str, Any], where: str) -> dict[str, Value]:
        out: dict[str, Value] = {}
        for name, value in raw.items():
            key = self.key(name, f"{where}.{name}")
            if key in out:
                raise self.fail(f"{where}.{name}", f"'{key}' is given twice")
            out[key] = self.value(key, value, f"{where}.{name}")
        return out

    def axis(self, name: str, raw: Any) -> Axis:
        where = f"grid.{name}"
        if not isinstance(raw, list) or not raw:
            raise self.fail(where, "must be a non-empty list of values (or of tables)")
        if len(raw) > MAX_VALUES:
            raise self.fail(where, f"has {len(raw)} values; at most {MAX_VALUES}")
        if all(isinstance(v, dict) for v in raw):
            return self.bundle(name, raw)
        key = self.key(name, where)
        values = [self.value(key, v, f"{where}[{i}]") for i, v in enumerate(raw)]
        labels = tuple(label(v) for v in raw)
        if len(set(labels)) != len(labels):
            dup = next(x for x in labels if labels.count(x) > 1)
            raise self.fail(where, f"value {dup!r} is given twice")
        return Axis(key, labels, tuple({key: v} for v in values))

    def bundle(self, name: str, raw: list[dict[str, Any]]) -> Axis:
        """An axis whose values are tables: several options that vary together."""
        if not _AXIS_NAME.match(name) or name.replace("_", "-") in self.options:
            raise self.fail(f"grid.{name}", "a list of tables needs a name of its own (letters, "
                                            "digits, - and _), not a sim option's")
        labels, settings = [], []
        for i, table in enumerate(raw):
            where = f"grid.{name}[{i}]"
            table = dict(table)
            tag = table.pop("name", f"{name}{i}")
            if not isinstance(tag, str) or not tag or len(tag) > 100 or _CONTROL.search(tag):
                raise self.fail(f"{where}.name", "must be a short non-empty string")
            if tag in labels:
                raise self.fail(f"{where}.name", f"'{tag}' is given twice")
            if not table:
                raise self.fail(where, "sets no option")
            labels.append(tag)
            settings.append(self.table(table, where))
        return Axis(name, tuple(labels), tuple(settings))


def _sweep_table(reader: _Reader, raw: Any) -> tuple[str, tuple[str, ...], float | None]:
    if not isinstance(raw, dict):
        raise reader.fail("sweep", "must be a table")
    unknown = sorted(set(raw) - (_TABLES["sweep"] or set()))
    if unknown:
        raise reader.fail(f"sweep.{unknown[0]}", "unknown key (known: goals, name, timeout_s)")
    name = raw.get("name", reader.path.stem)
    if not isinstance(name, str) or not name or len(name) > 100 or _CONTROL.search(name):
        raise reader.fail("sweep.name", "must be a short non-empty string")
    goals = raw.get("goals", list(GOALS[:6]))
    if (not isinstance(goals, list) or not goals or len(goals) > len(GOALS)
            or not all(isinstance(g, str) for g in goals)):
        raise reader.fail("sweep.goals", "must be a non-empty list of metric names")
    bad = [g for g in goals if g not in GOALS]
    if bad:
        raise reader.fail("sweep.goals", f"unknown goal {bad[0]!r:.60} (known: {', '.join(GOALS)})")
    timeout = raw.get("timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)
                                or not 0 < timeout <= 30 * 86400):
        raise reader.fail("sweep.timeout_s", "must be a number of seconds in (0, 30 days]")
    return name, tuple(dict.fromkeys(goals)), None if timeout is None else float(timeout)


def load_grid(path: Path) -> Grid:
    """The grid in ``path``; InputError (one line: file, key, what is wrong) otherwise."""
    data = read_toml(path, "sweep grid", limit=GRID_MAX_BYTES)
    reader = _Reader(path)
    unknown = sorted(set(data) - set(_TABLES))
    if unknown:
        raise reader.fail(unknown[0], "unknown table (expected [sweep], [fixed], [grid])")
    for table in ("fixed", "grid"):
        if not isinstance(data.get(table, {}), dict):
            raise reader.fail(table, "must be a table")
    name, goals, timeout = _sweep_table(reader, data.get("sweep", {}))
    fixed = reader.table(data.get("fixed", {}), "fixed")
    axes = tuple(reader.axis(k, v) for k, v in data.get("grid", {}).items())
    size = 1
    for axis in axes:
        size *= len(axis.labels)
        if size > MAX_POINTS:
            raise reader.fail("grid", f"the grid has more than {MAX_POINTS:,} points")
    _check_overlaps(reader, fixed, axes)
    return Grid(path, name, fixed, axes, goals, timeout)


def _check_overlaps(reader: _Reader, fixed: dict[str, Value], axes: tuple[Axis, ...]) -> None:
    owner = {key: "[fixed]" for key in fixed}
    for axis in axes:
        keys = set().union(*(s.keys() for s in axis.settings))
        for key in sorted(keys):
            if key in owner:
                raise reader.fail(f"grid.{axis.name}", f"'{key}' is also set by {owner[key]}")
            owner[key] = f"grid.{axis.name}"
    if "trace" not in owner:
        raise reader.fail("fixed.trace", "no trace: give trace = \"FILE\" in [fixed] or [grid]")


def points(grid: Grid) -> list[Point]:
    """Every point of the grid, the last axis varying fastest; options in a fixed order (fixed
    first, then the axes'), so a point's command line, and its key, depend only on the file."""
    out = []
    for index, combo in enumerate(itertools.product(*(range(len(a.labels)) for a in grid.axes))):
        options = dict(grid.fixed)
        for axis, i in zip(grid.axes, combo, strict=True):
            options.update(axis.settings[i])
        labels = {a.name: a.labels[i] for a, i in zip(grid.axes, combo, strict=True)}
        out.append(Point(index, labels, options))
    return out


__all__ = ["GOALS", "MAX_POINTS", "Axis", "Grid", "Option", "Point", "load_grid", "points",
           "sim_options", "to_argv"]
