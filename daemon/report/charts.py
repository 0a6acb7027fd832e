"""Charts as SVG ``data:`` URIs (matplotlib, Agg backend): the HTML needs no JavaScript and no
network to show them."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from datetime import UTC, datetime

from railgang.daemon.report.model import CLASS_NAMES, Report


def _figure(width: float = 7.5, height: float = 2.8):  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    fig.set_layout_engine("constrained")
    return fig


def _uri(fig) -> str:  # type: ignore[no-untyped-def]
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _hours(t: Sequence[float], since: int) -> list[float]:
    return [(x - since) / 3600 for x in t]


def _clean(v: Sequence[float]) -> list[float]:
    return [x if isinstance(x, (int, float)) and not math.isnan(x) else math.nan for x in v]


def team_chart(report: Report) -> str:
    fig = _figure(7.5, max(2.2, 0.45 * len(report.teams) + 1.2))
    ax = fig.add_subplot()
    rows = report.teams[:25]
    names = [r.team for r in rows]
    y = list(range(len(rows)))
    ax.barh([i - 0.27 for i in y], [r.allocated_gpu_h for r in rows], 0.27, label="allocated")
    ax.barh(y, [r.compute_gpu_h or 0 for r in rows], 0.27, label="compute")
    ax.barh([i + 0.27 for i in y], [r.productive_gpu_h or 0 for r in rows], 0.27,
            label="productive")
    for i, r in enumerate(rows):
        if r.quota_gpu_h:
            ax.plot([r.quota_gpu_h] * 2, [i - 0.45, i + 0.45], color="black", lw=2)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel("GPU-hours (black bar: guarantee)")
    ax.legend(loc="lower right", fontsize="small")
    return _uri(fig)


def fleet_chart(report: Report) -> str:
    fig = _figure()
    ax = fig.add_subplot()
    s = report.series
    h = _hours(s["t"], report.since)
    ax.plot(h, _clean(s["alloc_pct"]), label="allocated %")
    ax.plot(h, _clean(s["util_pct"]), label="SM utilisation %")
    ax.set_ylim(0, 105)
    ax.set_xlim(0, (report.until - report.since) / 3600)
    ax.set_xlabel(f"hours since {datetime.fromtimestamp(report.since, UTC):%Y-%m-%d %H:%M} UTC")
    if any(not math.isnan(x) for x in _clean(s["power_w"])):
        ax2 = ax.twinx()
        ax2.plot(h, _clean(s["power_w"]), color="tab:red", alpha=0.5, label="power W/GPU")
        ax2.set_ylabel("W per GPU")
        ax2.legend(loc="upper right", fontsize="small")
    ax.legend(loc="upper left", fontsize="small")
    return _uri(fig)


def queue_chart(report: Report) -> str:
    fig = _figure()
    ax = fig.add_subplot()
    h = _hours(report.series["t"], report.since)
    for pc, name in CLASS_NAMES.items():
        ax.step(h, report.series.get(f"queue_{pc}", [0.0] * len(h)), where="post",
                label=f"{pc} {name}")
    ax.set_ylabel("jobs waiting")
    ax.set_xlabel("hour of the day")
    ax.legend(loc="upper left", fontsize="small", ncols=4)
    return _uri(fig)


def pool_chart(report: Report) -> str:
    fig = _figure(7.5, max(2.0, 0.5 * len(report.pools) + 1.2))
    ax = fig.add_subplot()
    names = [p.pool for p in report.pools]
    y = list(range(len(names)))
    ax.barh([i - 0.2 for i in y], [p.util_pct for p in report.pools], 0.4, label="allocated %")
    ax.barh([i + 0.2 for i in y], [p.compute_pct or 0 for p in report.pools], 0.4,
            label="compute %")
    ax.axvspan(70, 85, color="green", alpha=0.1, label="target 70-85 %")
    ax.set_yticks(y, names)
    ax.set_xlim(0, 105)
    ax.legend(loc="lower right", fontsize="small")
    return _uri(fig)


def all_charts(report: Report) -> dict[str, str]:
    return {"teams": team_chart(report), "fleet": fleet_chart(report),
            "queue": queue_chart(report), "pools": pool_chart(report)}


__all__ = ["all_charts", "fleet_chart", "pool_chart", "queue_chart", "team_chart"]
