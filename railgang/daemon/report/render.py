"""Write a :class:`Report` as HTML (jinja2, charts inline, no JavaScript, no network), CSV (one
file per table plus ``report.csv`` in long form: table, row, column, value) and JSON."""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from railgang.daemon.report.charts import all_charts
from railgang.daemon.report.model import (
    CLASS_NAMES,
    ClassRow,
    EndedRow,
    JobRow,
    NodeRow,
    PoolRow,
    Report,
    TeamRow,
    TeamWaitRow,
    UserRow,
)
from railgang.daemon.safe_output import CsvWriter
from railgang.errors import InputError

TABLES = ("teams", "jobs", "pools", "queue", "anomalies", "users", "ended", "nodes", "waits")
_COLUMNS: dict[str, tuple[str, ...]] = {
    "teams": tuple(f.name for f in fields(TeamRow)),
    "jobs": tuple(f.name for f in fields(JobRow)),
    "pools": tuple(f.name for f in fields(PoolRow)),
    "queue": tuple(f.name for f in fields(ClassRow)),
    "anomalies": ("kind", "subject", "team", "at", "value", "threshold", "unit", "cost",
                  "detail", "suggestion"),
    "users": tuple(f.name for f in fields(UserRow)),
    "ended": tuple(f.name for f in fields(EndedRow)),
    "nodes": tuple(f.name for f in fields(NodeRow)),
    "waits": tuple(f.name for f in fields(TeamWaitRow)),
}


def _rows(report: Report, table: str) -> list[dict[str, Any]]:
    tables: dict[str, list[Any]] = {
        "teams": list(report.teams), "jobs": list(report.top_jobs), "pools": list(report.pools),
        "queue": list(report.queue), "anomalies": list(report.anomalies),
        "users": list(report.users), "ended": list(report.ended),
        "nodes": list(report.nodes_down), "waits": list(report.team_waits)}
    items = tables[table]
    return [asdict(x) for x in items]


def _cell(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return v


def to_csv(report: Report, table: str = "all") -> str:
    """One table (``teams``, ``jobs``, ...) or ``all``: every table in long form."""
    buf = io.StringIO()
    w = CsvWriter(buf)  # job names, accounts, anomaly details: users' text (safe_output)
    if table == "all":
        w.writerow(["table", "row", "column", "value"])
        for name, value in report.totals.items():
            w.writerow(["totals", 0, name, _cell(value)])
        w.writerow(["totals", 0, "currency", report.currency])
        for name, value in report.team_totals.items():
            w.writerow(["team_totals", 0, name, _cell(value)])
        for name in TABLES:
            for i, row in enumerate(_rows(report, name)):
                for col in _COLUMNS[name]:
                    w.writerow([name, i, col, _cell(row[col])])
        chaos = asdict(report.chaos)
        for col in ("preemptions", "resizes", "spot_interruptions", "fault_restarts",
                    "lost_gpu_h", "lost_cost"):
            w.writerow(["chaos", 0, col, chaos[col]])
        return buf.getvalue()
    if table not in _COLUMNS:
        raise InputError(f"unknown table {table!r}; choose all, {', '.join(TABLES)}",
                         field="table")
    w.writerow(_COLUMNS[table])
    for row in _rows(report, table):
        w.writerow([_cell(row[c]) for c in _COLUMNS[table]])
    return buf.getvalue()


def _nan_to_none(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {k: _nan_to_none(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_nan_to_none(x) for x in v]
    return v


def to_json(report: Report) -> str:
    return json.dumps(_nan_to_none(report.as_dict()), indent=1, sort_keys=True,
                      allow_nan=False)


def _env() -> Any:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("railgang.daemon.report", "templates"),
                      autoescape=select_autoescape(["html", "j2"]), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["when"] = lambda t: "" if t is None else \
        datetime.fromtimestamp(t, UTC).strftime("%H:%M")
    env.filters["stamp"] = lambda t: "" if t is None else \
        datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")
    env.filters["dur"] = lambda s: "" if s is None else (
        f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.0f} min")
    return env


def _num(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.{digits}f}"


def to_html(report: Report) -> str:
    return str(_env().get_template("report.html.j2").render(
        r=report, charts=all_charts(report), class_names=CLASS_NAMES))


def write_report(report: Report, out: Path) -> list[Path]:
    """Write report.html, report.json, report.csv and one CSV per table into ``out``."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {"report.html": to_html(report), "report.json": to_json(report),
                 "report.csv": to_csv(report, "all")}
        files.update({f"{t}.csv": to_csv(report, t) for t in TABLES})
        written = []
        for name, text in files.items():
            path = out / name
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)  # a reader never sees half a report
            written.append(path)
    except OSError as exc:
        raise InputError(f"cannot write the report: {exc.strerror or exc}; choose a writable "
                         "--out directory", path=str(out), field="--out") from exc
    return written


__all__ = ["TABLES", "to_csv", "to_html", "to_json", "write_report"]
