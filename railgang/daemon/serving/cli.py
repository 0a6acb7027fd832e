"""``railgang serving``: serving deployments from a demand file, and their forecast.

``show FILE`` lists the deployments (TP group, replica range, switch-in time, GPUs at peak and on
average); ``forecast FILE`` fits the seasonal model (``forecast.py``) on all but the last
``--holdout-days`` days, forecasts those day-ahead and prints the error and the safety buffer it
implies. Rows the parser skips are warned about on stderr, naming their line.
"""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any

import typer

from railgang.daemon.cli.common import JsonOpt, emit
from railgang.daemon.serving.model import ServingSet
from railgang.daemon.serving.sim_cli import load
from railgang.errors import ConfigError

serving_app = typer.Typer(help="Serving deployments beside training: demand, forecast, lending.",
                          no_args_is_help=True)

MAX_FORECAST_DAYS = 180
FileArg = Annotated[Path, typer.Argument(help="Demand CSV: time_s,deployment,replicas,tp[,...].")]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Stop at the first malformed row.")]


def _summary(got: ServingSet) -> list[dict[str, Any]]:
    rows = []
    for dep in got.deployments:
        pts = got.demand[dep.name].points
        span = pts[-1][0] - pts[0][0]
        # time-weighted mean of the step function over its span (the last point has no length)
        weighted = sum((b[0] - a[0]) * a[1] for a, b in pairwise(pts))
        mean = weighted / span if span > 0 else float(pts[0][1])
        rows.append({"deployment": dep.name, "tp": dep.tp, "min_replicas": dep.min_replicas,
                     "max_replicas": dep.max_replicas, "switch_in_s": dep.switch_in_s,
                     "pool_gpus": dep.pool_gpus, "mean_gpus": round(mean * dep.tp, 1),
                     "points": len(pts), "span_h": round(span / 3600, 2)})
    return rows


@serving_app.command("show")
def show(path: FileArg, strict: StrictOpt = False, as_json: JsonOpt = False) -> None:
    """List the deployments of a demand file: TP group, replicas, switch-in, GPUs."""
    got = load(path, strict)
    rows = _summary(got)
    lines = [f"{'deployment':<20} {'tp':>3} {'replicas':>10} {'switch-in':>9} {'pool GPUs':>9} "
             f"{'mean GPUs':>9} {'span h':>7}"]
    lines += [f"{r['deployment'][:20]:<20} {r['tp']:>3} "
              f"{str(r['min_replicas']) + '-' + str(r['max_replicas']):>10} "
              f"{r['switch_in_s'] / 60:>7.1f} m {r['pool_gpus']:>9} {r['mean_gpus']:>9.1f} "
              f"{r['span_h']:>7.1f}" for r in rows]
    lines.append(f"serving pool: {got.pool_gpus} GPUs at peak; {len(got.problems)} rows skipped")
    emit({"deployments": rows, "pool_gpus": got.pool_gpus, "skipped_rows": len(got.problems)},
         as_json, lines)


@serving_app.command("forecast")
def forecast(
    path: FileArg,
    deployment: Annotated[str | None, typer.Option(
        "--deployment", help="Only this deployment (default: all).")] = None,
    holdout_days: Annotated[int, typer.Option(
        "--holdout-days", min=1, max=60, help="Whole days held back to measure the error on.")] = 2,
    step_s: Annotated[float, typer.Option(
        "--step-s", min=60, max=3600, help="Sample spacing the model sees.")] = 900.0,
    quantile: Annotated[float, typer.Option(
        "--quantile", min=0.5, max=0.9999, help="Quantile of the error kept as the buffer.")]
    = 0.99,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Forecast demand (daily + weekly seasonality), its error on held-back days, the buffer."""
    from railgang.daemon.serving.forecast import ForecastConfig, backtest

    if round(86400 / step_s) * step_s != 86400:
        raise ConfigError(f"--step-s {step_s:g} does not divide a day")
    got = load(path, strict)
    names = [d.name for d in got.deployments]
    if deployment is not None and deployment not in names:
        raise ConfigError(f"no deployment {deployment!r}; the file has {', '.join(names)}")
    config = ForecastConfig(step_s=step_s, holdout_days=holdout_days, buffer_quantile=quantile)
    rows: list[dict[str, Any]] = []
    for dep in got.deployments:
        if deployment is not None and dep.name != deployment:
            continue
        series = got.demand[dep.name].sampled(step_s)
        keep = MAX_FORECAST_DAYS * config.per_day
        if len(series) > keep:  # a fit on years of samples takes minutes and says no more
            typer.echo(f"note: {dep.name}: the last {MAX_FORECAST_DAYS} days are used", err=True)
            series = series[-keep:]
        bt = backtest(series, config)
        rows.append({"deployment": dep.name, "holdout_days": bt.days,
                     "mae_replicas": round(bt.mae, 3), "bias_replicas": round(bt.bias, 3),
                     "interval_coverage": round(bt.coverage, 4),
                     "interval": 1 - config.alpha, "buffer_quantile": quantile,
                     "buffer_replicas": round(bt.buffer, 2),
                     "buffer_gpus": round(bt.buffer * dep.tp, 1)})
    lines = [f"{'deployment':<20} {'MAE':>6} {'bias':>6} {'in 95% PI':>9} "
             f"{'buffer (q' + format(quantile, 'g') + ')':>16}"]
    lines += [f"{r['deployment'][:20]:<20} {r['mae_replicas']:>6.2f} {r['bias_replicas']:>6.2f} "
              f"{r['interval_coverage']:>9.1%} {r['buffer_replicas']:>7.1f} rep "
              f"{r['buffer_gpus']:>5.0f} GPU" for r in rows]
    lines.append(f"error of day-ahead forecasts on the last {holdout_days} day(s), in replicas")
    emit({"deployments": rows, "step_s": step_s}, as_json, lines)


def _clock(t: float) -> str:
    day, rest = divmod(int(t), 86400)
    return f"day {day} {rest // 3600:02d}:{rest % 3600 // 60:02d}"


@serving_app.command("plan")
def plan_cmd(
    path: FileArg,
    history_days: Annotated[int, typer.Option(
        "--history-days", min=3, max=366, help="Days of demand before the planned window.")] = 10,
    mode: Annotated[str, typer.Option(
        "--mode", help="forecast, reactive (no forecast) or static.")] = "forecast",
    buffer_gpus: Annotated[float | None, typer.Option(
        "--buffer-gpus", min=0, help="A fixed buffer per deployment instead of the quantile.")]
    = None,
    limit: Annotated[int, typer.Option(
        "--changes", min=0, help="Changes of the schedule shown (text; --json has all).")] = 20,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """When serving GPUs are lent to training and taken back, by forecast, and what it costs."""
    from railgang.daemon.serving.replay import plan_window
    from railgang.daemon.serving.sim_cli import knobs_from, parse_modes

    modes = parse_modes(mode)
    if len(modes) != 1:
        raise ConfigError("--mode takes one of static, forecast, reactive")
    got = load(path, strict)
    knobs = knobs_from(history_days, buffer_gpus, 0.99)
    planned = plan_window(got, modes[0], knobs)
    start = history_days * 86400.0
    lent = planned.lent_gpus
    changes = [(start + k * knobs.step_s, g) for k, g in enumerate(lent)
               if k == 0 or g != lent[k - 1]]
    res = planned.outcome
    summary = {"mode": modes[0], "window_days": round(planned.window_s / 86400, 3),
               "buffers_replicas": {k: round(v, 2) for k, v in planned.buffers.items()},
               "forecast_mae_replicas": {k: round(v, 3) for k, v in planned.forecast_mae.items()},
               "unmet_replica_min": round(res.unmet_replica_min, 1),
               "unmet_share": round(res.unmet_share, 6), "late_replicas": res.late_replicas,
               "reactive_starts": res.reactive_starts,
               "mean_lent_gpus": round(res.lent_gpu_h / (planned.window_s / 3600), 1),
               "schedule": [{"time_s": t, "lent_gpus": g} for t, g in changes]}
    lines = [f"{modes[0]}: {summary['mean_lent_gpus']} GPUs lent on average over "
             f"{summary['window_days']} days; unmet {res.unmet_replica_min:,.0f} replica-min "
             f"({res.unmet_share:.3%}), {res.late_replicas} late, {res.reactive_starts} reactive",
             "buffers (replicas): " + (", ".join(f"{k} {v:.1f}" for k, v in
                                                 planned.buffers.items()) or "-")]
    lines += [f"{_clock(t)}  lend {g} GPUs" for t, g in changes[:limit]]
    if len(changes) > limit:
        lines.append(f"... {len(changes) - limit} more changes (--changes, --json)")
    emit(summary, as_json, lines)


@serving_app.command("fetch")
def fetch(
    url: Annotated[str, typer.Argument(help="Prometheus base URL, e.g. http://prom:9090.")],
    query: Annotated[str, typer.Option("--query", help="PromQL giving replicas needed per "
                                                       "deployment (one series each).")],
    out: Annotated[Path, typer.Option("--out", help="Demand CSV to write.")],
    days: Annotated[int, typer.Option("--days", min=1, max=180, help="History to fetch.")] = 14,
    step_s: Annotated[float, typer.Option("--step-s", min=60, max=3600, help="Sample step.")]
    = 900.0,
    label: Annotated[str, typer.Option("--label", help="Label naming the deployment.")]
    = "deployment",
    tp: Annotated[str, typer.Option("--tp", help="GPUs per replica: N, or NAME=N,... (others 1).")]
    = "1",
    end: Annotated[float | None, typer.Option(
        "--end", help="End of the range, Unix seconds (default: now).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a demand CSV from Prometheus' range query (the live demand history)."""
    import time

    from railgang.daemon.serving.prometheus import demand_csv, parse_matrix, query_range

    default_tp, per = _tp_spec(tp)
    stop = time.time() if end is None else end
    if not math.isfinite(stop) or stop <= 0:
        raise ConfigError("--end must be a positive Unix time")
    start = stop - days * 86400.0
    fetched = parse_matrix(query_range(url, query, start, stop, step_s), start, label)
    if not fetched.series:
        raise ConfigError(f"the query gave no series with a {label!r} label")
    if fetched.skipped:
        typer.echo(f"warning: skipped {fetched.skipped} samples (not a finite number >= 0, or "
                   f"no {label!r} label)", err=True)
    out.write_text(demand_csv(fetched, per, default_tp))
    emit({"out": str(out), "deployments": sorted(fetched.series), "skipped": fetched.skipped},
         as_json, f"wrote {out}: {', '.join(sorted(fetched.series))}")


def _tp_spec(text: str) -> tuple[int, dict[str, int]]:
    """``8`` or ``chat=8,code=2`` (deployments not named take 1)."""
    try:
        if "=" not in text:
            value = int(text)
            if not 1 <= value <= 64:
                raise ValueError(text)
            return value, {}
        pairs = dict(p.split("=", 1) for p in text.split(",") if p.strip())
        per = {k.strip(): int(v) for k, v in pairs.items()}
        if not all(1 <= v <= 64 for v in per.values()):
            raise ValueError(text)
        return 1, per
    except ValueError:
        raise ConfigError(f"--tp: expected N or NAME=N,... with N in 1..64, got {text[:40]!r}") \
            from None


__all__ = ["serving_app"]


@serving_app.command("status")
def status_cmd(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The deployments as the daemon's last cycle left them: replicas and lent nodes."""
    from datetime import UTC, datetime

    from railgang.daemon.cli.common import settings_from
    from railgang.daemon.serving.status import read_status, status_path

    body = read_status(status_path(settings_from(ctx)))

    def when(t: Any) -> str:
        if not isinstance(t, (int, float)):
            return "not foreseen"
        try:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")
        except (OverflowError, ValueError, OSError):  # a time no calendar holds (1e300)
            return f"{t:g} (epoch seconds)"

    lines = []
    for d in body["deployments"]:
        lines.append(f"{d.get('deployment')}: tp {d.get('tp')}, replicas {d.get('running')} "
                     f"running, target {d.get('target')} (demand now wants {d.get('want')}), "
                     f"{d.get('queued')} queued; pool {len(d.get('pool') or [])} nodes, "
                     f"{len(d.get('lent') or {})} lent")
        lines += [f"  lent {node} until {when(t)}" for node, t in sorted((d.get("lent") or {}).items())]
    lines.append(f"unforecast replicas started: {body.get('unforecast_started', 0)}")
    emit(body, as_json, lines)
