"""All points of a plan in one table: ``results.csv`` (one row per point) and ``results.json``
(the same rows, plus the plan's provenance). A row carries the point's axis labels, every
number the sim reported for it, its timings and where it came from (key, git revision, code hash,
input hashes); a point without a standing result is a row too: ``failed`` with its error or ``missing``; a
result whose code has changed since keeps its numbers, as ``stale``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from railgang.daemon.safe_output import CsvWriter
from railgang.daemon.sim.sweep.grid import GOALS
from railgang.daemon.sim.sweep.plan import Plan, now_iso
from railgang.daemon.sim.sweep.store import Store, write_atomic
from railgang.errors import InputError

# provenance columns after the metrics
_TAIL = ("point_wall_s", "cpu_s", "git", "code", "inputs", "host", "started", "key", "error")


def _metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The numbers of a point's sim --json: the results of its one policy."""
    runs = result.get("results") if isinstance(result, dict) else None
    if not isinstance(runs, dict) or len(runs) != 1:
        return {}
    (run,) = runs.values()
    if not isinstance(run, dict):
        return {}
    return {k: v for k, v in run.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
            and (not isinstance(v, float) or math.isfinite(v))}


def rows(plan: Plan, store: Store) -> list[dict[str, Any]]:
    out = []
    for point in plan.points:
        row: dict[str, Any] = {"point": point.index, **point.labels}
        state, data = store.lookup(point.key)
        if data is not None:  # a stale result keeps its numbers: the table says it is stale
            row["status"] = state
            row.update(_metrics(data.get("result", {})))
            row.update(point_wall_s=data.get("wall_s"), cpu_s=data.get("cpu_s"),
                       git=data.get("git"), code=data.get("code"), host=data.get("host"),
                       started=data.get("started"))
            if state == "stale":
                row["error"] = "the code its replay loaded has changed since; rerun to refresh"
        else:
            failure = store.failure(point.key)
            row["status"] = "failed" if failure else "missing"
            row["error"] = failure.get("error", "") if failure else ""
        row["inputs"] = ";".join(f"{k}={v}" for k, v in sorted(point.inputs.items()))
        row["key"] = point.key
        out.append(row)
    return out


def columns(plan: Plan, table: list[dict[str, Any]]) -> list[str]:
    """Point, axes, status, the goals, the other metrics (first seen order), provenance."""
    head = ["point", *plan.axes, "status"]
    seen = dict.fromkeys(g for g in GOALS if any(g in r for r in table) and g not in _TAIL)
    for r in table:
        seen.update(dict.fromkeys(k for k in r if k not in head and k not in _TAIL))
    return [*head, *seen, *_TAIL]


def write_tables(plan: Plan, store: Store, table: list[dict[str, Any]]) -> tuple[Path, Path]:
    names = columns(plan, table)
    csv_path, json_path = store.root / "results.csv", store.root / "results.json"
    tmp = csv_path.with_suffix(".csv.tmp")
    try:
        with tmp.open("w", newline="", encoding="utf-8") as fh:
            writer = CsvWriter(fh, "\r\n")  # axis values come from the sweep file (safe_output)
            writer.writerow(names)
            writer.writerows([row.get(n, "") for n in names] for row in table)
        tmp.replace(csv_path)
    except OSError as exc:
        raise InputError(f"cannot write the table: {exc.strerror or exc}", path=str(csv_path)) from exc
    write_atomic(json_path, {"sweep": plan.name, "grid": plan.grid, "gathered": now_iso(),
                             "git": plan.git, "axes": plan.axes,
                             "goals": plan.goals, "columns": names, "points": table})
    return csv_path, json_path


__all__ = ["columns", "rows", "write_tables"]
