"""Rendering of simulation results: rich tables, JSON, per-job CSV, ratios against a baseline."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from railgang.daemon.safe_output import CsvWriter, term_text
from railgang.daemon.sim.engine import RunResult
from railgang.daemon.sim.metrics import Metrics
from railgang.errors import InputError

# metric, column label, how to show it
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("mean_jct_s", "mean JCT h", "h"),
    ("median_jct_s", "median h", "h"),
    ("p95_jct_s", "p95 h", "h"),
    ("p99_jct_s", "p99 h", "h"),
    ("mean_queueing_s", "queue h", "h"),
    ("makespan_s", "makespan h", "h"),
    ("util_allocated", "util alloc", "%"),
    ("util_productive", "util prod", "%"),
    ("rho_mean", "ρ mean", "x"),
    ("rho_max", "ρ max", "x"),
    ("rho_share_above_2", "ρ>2", "%"),
    ("preemptions", "preempt", "n"),
    ("resizes", "resizes", "n"),
    ("gpu_hours_lost_to_preemption", "GPU-h lost", "n"),
)
# finish-time fairness as users feel it: the distribution of ρ, all jobs and jobs >= 1 GPU-hour
FAIRNESS_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rho_p50", "ρ p50", "x"),
    ("rho_p90", "ρ p90", "x"),
    ("rho_p99", "ρ p99", "x"),
    ("rho_max", "ρ max", "x"),
    ("rho_share_above_2", "ρ>2", "%"),
    ("rho_big_p50", "big p50", "x"),
    ("rho_big_p90", "big p90", "x"),
    ("rho_big_p99", "big p99", "x"),
    ("rho_big_max", "big max", "x"),
    ("rho_big_share_above_2", "big ρ>2", "%"),
)
# ratios shown by --compare (lower is better except utilisation)
RATIO_KEYS = ("mean_jct_s", "median_jct_s", "p99_jct_s", "mean_queueing_s", "rho_max",
              "util_allocated")


def fmt(value: float, kind: str) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "—"
    if kind == "h":
        return f"{value / 3600:.2f}"
    if kind == "%":
        return f"{100 * value:.1f}%"
    if kind == "x":
        return f"{value:.2f}"
    return f"{value:,.0f}" if isinstance(value, int) or value >= 100 else f"{value:.1f}"


def ratios(results: Mapping[str, Metrics], baseline: str) -> dict[str, dict[str, float]]:
    base = results[baseline]
    out: dict[str, dict[str, float]] = {}
    for name, m in results.items():
        row = {}
        for key in RATIO_KEYS:
            b = float(getattr(base, key))
            v = float(getattr(m, key))
            row[key] = v / b if b and not math.isnan(b) and not math.isnan(v) else math.nan
        out[name] = row
    return out


def results_tables(runs: Sequence[RunResult], title: str) -> list[Table]:
    """Two tables (time; utilisation, fairness and churn) so each fits a terminal."""
    split = 6
    tables = []
    for part, (columns, subtitle) in enumerate(((COLUMNS[:split], "job completion"),
                                                 (COLUMNS[split:], "utilisation, fairness"))):
        table = Table(title=f"{title} — {subtitle}")
        table.add_column("policy", style="bold")
        if part == 0:
            table.add_column("done", justify="right")
        for _, label, _ in columns:
            table.add_column(label, justify="right")
        for run in runs:
            m = run.metrics
            lead = [run.policy] + ([f"{m.finished:,}/{m.jobs:,}"] if part == 0 else [])
            table.add_row(*lead, *(fmt(getattr(m, k), kind) for k, _, kind in columns))
        tables.append(table)
    return tables


def fairness_table(runs: Sequence[RunResult]) -> Table:
    """ρ = JCT / run time on a 1/N share; "big" = jobs of at least one GPU-hour."""
    table = Table(title="finish-time fairness ρ (big = jobs of ≥ 1 GPU-hour)")
    table.add_column("policy", style="bold")
    table.add_column("big jobs", justify="right")
    for _, label, _ in FAIRNESS_COLUMNS:
        table.add_column(label, justify="right")
    for run in runs:
        m = run.metrics
        table.add_row(run.policy, f"{m.big_jobs_finished:,}",
                      *(fmt(getattr(m, k), kind) for k, _, kind in FAIRNESS_COLUMNS))
    return table


def idle_table(runs: Sequence[RunResult], cluster_gpus: int) -> Table:
    """Work conservation: GPU-hours idle while a waiting job would have fit, by its reason."""
    reasons = sorted({r for run in runs for r in run.metrics.idle_while_waiting_by_reason},
                     key=lambda r: -sum(run.metrics.idle_while_waiting_by_reason.get(r, 0.0)
                                        for run in runs))
    table = Table(title="GPU-h idle while a waiting job would have fit (by count; placeable = "
                        "a valid gang slot existed), by the job's pending reason")
    table.add_column("policy", style="bold")
    for col in ("total", "placeable", "% of capacity", *reasons):
        table.add_column(col, justify="right")
    for run in runs:
        m = run.metrics
        capacity = m.makespan_s / 3600 * cluster_gpus
        share = m.idle_while_waiting_gpu_h / capacity if capacity else math.nan
        table.add_row(run.policy, f"{m.idle_while_waiting_gpu_h:,.1f}",
                      f"{m.idle_while_waiting_placeable_gpu_h:,.1f}", fmt(share, "%"),
                      *(f"{m.idle_while_waiting_by_reason.get(r, 0.0):,.1f}" for r in reasons))
    return table


def ratio_table(table_ratios: Mapping[str, Mapping[str, float]], baseline: str) -> Table:
    labels = {k: label for k, label, _ in COLUMNS}
    table = Table(title=f"ratio vs {baseline} (same run; < 1 is better, except util)")
    table.add_column("policy", style="bold")
    for key in RATIO_KEYS:
        table.add_column(labels[key], justify="right")
    for name, row in table_ratios.items():
        table.add_row(name, *("—" if math.isnan(row[k]) else f"{row[k]:.2f}×" for k in RATIO_KEYS))
    return table


def account_table(run: RunResult, top: int = 15) -> Table:
    table = Table(title=f"per account ({run.policy})")
    for col in ("account", "jobs", "done", "mean JCT h", "queue h", "ρ mean", "ρ p50", "ρ p90",
                "ρ p99", "ρ max", "ρ>2", "big max", "GPU-h", "idle GPU-h"):
        table.add_column(col, justify="left" if col == "account" else "right")
    accounts = sorted(run.metrics.per_account, key=lambda a: -a.gpu_hours)[:top]
    for a in accounts:
        table.add_row(term_text(a.account), str(a.jobs), str(a.finished), fmt(a.mean_jct_s, "h"),
                      fmt(a.mean_queueing_s, "h"), fmt(a.rho_mean, "x"), fmt(a.rho_p50, "x"),
                      fmt(a.rho_p90, "x"), fmt(a.rho_p99, "x"), fmt(a.max_rho, "x"),
                      fmt(a.rho_share_above_2, "%"), fmt(a.rho_big_max, "x"),
                      f"{a.gpu_hours:,.0f}", f"{a.idle_while_waiting_gpu_h:,.1f}")
    return table


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def to_json(runs: Sequence[RunResult], meta: Mapping[str, Any], baseline: str | None,
            ) -> dict[str, Any]:
    results = {}
    for run in runs:
        data = run.metrics.to_dict()
        data.update(cycles=run.cycles, events=run.events, wall_s=run.wall_s,
                    unfinished=len(run.unfinished_reasons),
                    failed_actions=dict(run.failed_actions))
        results[run.policy] = data
    out: dict[str, Any] = dict(meta)
    out["results"] = results
    if baseline is not None:
        out[f"ratios_vs_{baseline}"] = ratios({r.policy: r.metrics for r in runs}, baseline)
    return dict(_clean(out))


JOB_COLUMNS = ("policy", "job_id", "account", "gpus", "submit_s", "start_s", "finish_s", "jct_s",
               "queueing_s", "duration_s", "preemptions", "resizes", "lost_gpu_h", "rejected",
               "rho", "idle_while_waiting_gpu_h", "first_leaves")


def write_jobs_csv(path: Path, runs: Sequence[RunResult],
                   cluster_gpus: int | None = None) -> None:
    """One row per job and policy; ``rho`` needs the cluster's GPUs (left empty without)."""
    try:
        with path.open("w", newline="", encoding="utf-8") as fh:
            out = CsvWriter(fh, "\r\n")  # a trace's accounts are a file's text (safe_output)
            out.writerow(JOB_COLUMNS)
            for run in runs:
                for r in run.records:
                    rho = r.rho(cluster_gpus) if cluster_gpus else None
                    out.writerow([run.policy, r.job_id, r.account, r.gpus, r.submit,
                                  "" if r.start is None else r.start,
                                  "" if r.finish is None else r.finish,
                                  "" if r.jct is None else r.jct,
                                  "" if r.queueing is None else r.queueing,
                                  r.duration_s, r.preemptions, r.resizes,
                                  round(r.lost_gpu_s / 3600, 6), r.rejected or "",
                                  "" if rho is None else round(rho, 6),
                                  round(sum(r.idle_fit_gpu_s.values()) / 3600, 6),
                                  r.first_leaves or ""])
    except OSError as exc:
        raise InputError(f"cannot write per-job CSV: {exc.strerror}", path=str(path)) from exc


__all__ = ["COLUMNS", "FAIRNESS_COLUMNS", "RATIO_KEYS", "account_table", "fairness_table", "fmt",
           "idle_table", "ratio_table", "ratios", "results_tables", "to_json", "write_jobs_csv"]
