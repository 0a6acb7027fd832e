"""One chart per goal and knob: the goal (y) against the knob's values (x), as PNG and SVG in
``plots/<goal>--<knob>.{png,svg}``.

A knob is an axis of the grid with more than one value. The other axes make the series: one
line per combination of their values while there are at most MAX_SERIES of them (legend
``axis=value, ...``), else their mean with a band from min to max, so a chart stays readable
however large the grid. x is numeric when every value of the knob is a number, else the values
in the grid's order. Points without a result are left out (stale ones are drawn: the table
says which they are).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

MAX_SERIES = 8


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _series(table: list[dict[str, Any]], knob: str, goal: str, others: list[str],
            ) -> dict[str, dict[str, list[float]]]:
    """series label -> knob label -> the goal's values."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in table:
        value = row.get(goal)
        if row.get("status") not in ("done", "stale") or not isinstance(value, int | float):
            continue
        name = ", ".join(f"{a}={row[a]}" for a in others) or goal
        out[name][str(row[knob])].append(float(value))
    return out


def _chart(table: list[dict[str, Any]], knob: str, labels: list[str], goal: str,
           others: list[str], path: Path) -> bool:
    from matplotlib.figure import Figure  # no pyplot: no global state, no GUI backend

    series = _series(table, knob, goal, others)
    if not series:
        return False
    numbers = [_number(x) for x in labels]
    numeric = all(n is not None for n in numbers)
    xs = {lab: (num if numeric and num is not None else float(i))
          for i, (lab, num) in enumerate(zip(labels, numbers, strict=True))}
    fig = Figure(figsize=(7, 4.2), layout="constrained")
    ax = fig.add_subplot()
    if len(series) <= MAX_SERIES:
        for name, by_x in series.items():
            pts = sorted((xs[k], sum(v) / len(v)) for k, v in by_x.items())
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        if len(series) > 1:
            ax.legend(fontsize="small")
    else:
        pooled: dict[str, list[float]] = defaultdict(list)
        for by_x in series.values():
            for k, v in by_x.items():
                pooled[k].extend(v)
        pts3 = sorted((xs[k], sum(v) / len(v), min(v), max(v)) for k, v in pooled.items())
        x = [p[0] for p in pts3]
        ax.plot(x, [p[1] for p in pts3], marker="o", label=f"mean over {len(series)} series")
        ax.fill_between(x, [p[2] for p in pts3], [p[3] for p in pts3], alpha=0.25, label="min-max")
        ax.legend(fontsize="small")
    if not numeric:
        ax.set_xticks([xs[lab] for lab in labels], labels, rotation=30 if len(labels) > 4 else 0)
    ax.set_xlabel(knob)
    ax.set_ylabel(goal)
    ax.grid(alpha=0.3)
    ax.set_title(f"{goal} by {knob}")
    fig.savefig(path.with_suffix(".png"), dpi=110)
    fig.savefig(path.with_suffix(".svg"))
    return True


def write_plots(table: list[dict[str, Any]], axes: list[str], goals: list[str],
                out: Path) -> list[Path]:
    """Every goal against every knob; the files written (PNG and SVG of each chart)."""
    out.mkdir(parents=True, exist_ok=True)
    order: dict[str, list[str]] = {a: list(dict.fromkeys(str(r[a]) for r in table)) for a in axes}
    knobs = [a for a in axes if len(order[a]) > 1]
    written = []
    for knob in knobs:
        others = [a for a in knobs if a != knob]
        for goal in goals:
            stem = out / f"{goal}--{knob}"
            if _chart(table, knob, order[knob], goal, others, stem):
                written += [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    return written


__all__ = ["MAX_SERIES", "write_plots"]
