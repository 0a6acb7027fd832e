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


def _empty(ax, text: str = "no data in this window") -> None:  # type: ignore[no-untyped-def]
    """An empty chart says so, on a 0..1 axis (not matplotlib's -0.04..0.04 around zero)."""
    ax.set_ylim(0, 1)
    ax.set_xlim(0, 1)
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#777")


def _window_label(report: Report) -> str:
    return f"hours since {datetime.fromtimestamp(report.since, UTC):%Y-%m-%d %H:%M} UTC"


def team_chart(report: Report) -> str:
    fig = _figure(7.5, max(2.2, 0.45 * len(report.teams) + 1.2))
    ax = fig.add_subplot()
    rows = report.teams[:25]
    hours = (report.until - report.since) / 3600
    ax.set_title(f"GPU-hours per team over the window ({hours:g} h); black bar: guarantee "
                 f"x {hours:g} h", fontsize="small")
    if not any(r.allocated_gpu_h or r.quota_gpu_h for r in rows):
        _empty(ax, "no team used or holds GPUs in this window")
        return _uri(fig)
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
    ax.set_xlim(left=0)
    ax.set_xlabel("GPU-hours")
    ax.legend(loc="lower right", fontsize="small")
    return _uri(fig)


def fleet_chart(report: Report) -> str:
    """Allocation and SM utilisation over one denominator: the fleet's GPUs."""
    fig = _figure()
    ax = fig.add_subplot()
    s = report.series
    h = _hours(s["t"], report.since)
    gpus = sum(p.gpus for p in report.pools)
    ax.set_title(f"% of the fleet's {gpus:,} GPUs (a GPU without samples counts as idle)",
                 fontsize="small")
    if not h or not gpus:
        _empty(ax)
        return _uri(fig)
    ax.plot(h, _clean(s["alloc_pct"]), label="allocated")
    ax.plot(h, _clean(s.get("fleet_sm_pct", [math.nan] * len(h))), label="SM utilisation")
    ax.set_ylim(0, 105)
    ax.set_xlim(0, (report.until - report.since) / 3600)
    ax.set_ylabel(f"% of {gpus:,} GPUs")
    ax.set_xlabel(_window_label(report))
    ax.legend(loc="upper left", fontsize="small")
    return _uri(fig)


def power_chart(report: Report) -> str:
    fig = _figure(7.5, 2.4)
    ax = fig.add_subplot()
    s = report.series
    h = _hours(s["t"], report.since)
    power = _clean(s["power_w"])
    ax.set_title("mean power per GPU that reported a sample (W)", fontsize="small")
    if not any(not math.isnan(x) for x in power):
        _empty(ax, "no power samples in this window")
        return _uri(fig)
    ax.plot(h, power, color="tab:red")
    top = max(x for x in power if not math.isnan(x))
    ax.set_ylim(0, max(1.0, top * 1.1))
    ax.set_xlim(0, (report.until - report.since) / 3600)
    ax.set_ylabel("W per GPU")
    ax.set_xlabel(_window_label(report))
    return _uri(fig)


def queue_chart(report: Report) -> str:
    fig = _figure()
    ax = fig.add_subplot()
    h = _hours(report.series["t"], report.since)
    ax.set_title("jobs waiting, per priority class", fontsize="small")
    depth = {pc: report.series.get(f"queue_{pc}", [0.0] * len(h)) for pc in CLASS_NAMES}
    if not h or not any(any(v) for v in depth.values()):
        _empty(ax, "no job waited in this window")
        return _uri(fig)
    for pc, name in CLASS_NAMES.items():
        ax.step(h, depth[pc], where="post", label=f"{pc} {name}")
    ax.set_ylim(0, max(max(v) for v in depth.values()) * 1.1 + 0.5)
    ax.set_xlim(0, (report.until - report.since) / 3600)
    ax.set_ylabel("jobs waiting")
    ax.set_xlabel(_window_label(report))
    ax.legend(loc="upper left", fontsize="small", ncols=4)
    return _uri(fig)


def pool_chart(report: Report) -> str:
    fig = _figure(7.5, max(2.0, 0.5 * len(report.pools) + 1.2))
    ax = fig.add_subplot()
    ax.set_title("% of each pool's GPUs over the window (pool size in the table)",
                 fontsize="small")
    if not report.pools:
        _empty(ax, "no pool known")
        return _uri(fig)
    names = [f"{p.pool} ({p.gpus:,} GPUs)" for p in report.pools]
    y = list(range(len(names)))
    ax.barh([i - 0.2 for i in y], [p.util_pct for p in report.pools], 0.4, label="allocated %")
    ax.barh([i + 0.2 for i in y], [p.compute_pct or 0 for p in report.pools], 0.4,
            label="compute %")
    ax.axvspan(70, 85, color="green", alpha=0.1, label="target 70-85 %")
    ax.set_yticks(y, names)
    ax.set_xlim(0, 105)
    ax.set_xlabel("% of the pool's GPU-hours")
    ax.legend(loc="lower right", fontsize="small")
    return _uri(fig)


def trend_chart(report: Report) -> str:
    """Allocated GPU-hours per day, the fleet and its largest teams."""
    fig = _figure(7.5, 2.6)
    ax = fig.add_subplot()
    t = report.trend
    ax.set_title("allocated GPU-hours per UTC day (fleet and its five largest teams)",
                 fontsize="small")
    if t is None or not any(t.fleet_gpu_h):
        _empty(ax, "no use in these days")
        return _uri(fig)
    x = list(range(len(t.days)))
    ax.plot(x, t.fleet_gpu_h, marker="o", color="black", label="fleet")
    top = sorted(t.teams, key=lambda k: -sum(t.teams[k]))[:5]
    for team in top:
        ax.plot(x, t.teams[team], marker=".", label=team)
    ax.set_xticks(x, [d[5:] for d in t.days])
    ax.set_ylim(0, max(t.fleet_gpu_h) * 1.1)
    ax.set_ylabel("GPU-hours per day")
    ax.legend(loc="upper left", fontsize="small", ncols=3)
    return _uri(fig)


def all_charts(report: Report) -> dict[str, str]:
    return {"teams": team_chart(report), "fleet": fleet_chart(report),
            "power": power_chart(report), "queue": queue_chart(report),
            "pools": pool_chart(report), "trend": trend_chart(report)}


__all__ = ["all_charts", "fleet_chart", "pool_chart", "power_chart", "queue_chart",
           "team_chart", "trend_chart"]
