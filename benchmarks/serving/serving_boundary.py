"""The training-serving boundary (issue 19): serving capacity lent to training by forecast.

Three parts, each printed as a Markdown table:

1. **The chapter's scenario** (1,024 GPUs; a 400-GPU serving pool using 150 on average; 618
   training GPUs with a backlog; a 117-GPU buffer): utilisation static vs dynamic from its own
   inputs, through ``serving.plan`` and ``serving.fluid``; then the same with a day/night demand
   and a 15-minute switch-in (its cost shows).
2. **Two weeks beside the Philly-derived trace**: two deployments (chat: TP 8, 2-14 replicas;
   code: TP 2, 2-16 replicas; pools of 22 and 20 replicas) with AR(1) noise, a holiday (window
   day 4, a Monday) and an unforecast surge (chat x1.6 for 2 hours, window day 7 at 15:00), after
   10 days of history (the forecast is fitted on the first 7, its error measured on the last 3); the Philly jobs submitted in 14 days (from ``--trace-day``) replayed
   through the engine and the ``--policy`` core, the daemon's serving step deciding, on
   ``--training-nodes`` nodes beside the serving pools: static (serving keeps its pool), forecast (lends by forecast + error-quantile buffer),
   reactive (lends, no forecast: follows demand now + the same buffer).
3. **Buffer vs unmet demand**: the same demand planned with buffers from 0 to ``--max-buffer``
   replicas per deployment (the quantile buffers marked): unmet demand-minutes and GPUs lent;
   a PNG (``--png``).

    .venv/bin/python -m benchmarks.serving.serving_boundary [--training-nodes 24] [--png docs/serving_buffer.png]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from railgang.daemon.serving.fluid import Backlog, utilisation
from railgang.daemon.serving.forecast import ForecastConfig
from railgang.daemon.serving.model import Demand, Deployment, ServingSet
from railgang.daemon.serving.plan import PlanConfig, Upper, outcome, plan
from railgang.daemon.serving.replay import ServingKnobs, expect, plan_window, pool_nodes
from railgang.daemon.serving.synth import DemandShape, Surge, demand_series

DAY = 86400.0
HISTORY = 10  # a whole week to fit on, then Mon-Wed held back for the error and the buffer
HOLDOUT = 3
STEP = 900.0


def chapter() -> list[dict[str, Any]]:
    dep = Deployment("serve", tp=1, max_replicas=400, switch_in_s=900)
    rows = []
    for label, demand in (
            ("constant 150 GPUs", [150] * 1440),
            ("day 186 / night 100 GPUs", [186 if 480 <= m < 1320 else 100 for m in range(1440)] * 3),
            # the 08:00 ramp in 10 minutes, to 400 GPUs: beyond what the buffer covers
            ("night 100 / day 380 GPUs, 10-min ramp",
             [min(380, 100 + 28 * max(0, m - 480)) if 480 <= m < 1320 else 100
              for m in range(1440)] * 3)):
        for mode in ("static", "forecast", "reactive"):
            tl = plan(dep, demand, Upper(demand, 117), PlanConfig(step_s=60, mode=mode))
            u = utilisation([tl], Backlog(618), 1024)
            rows.append({"demand": label, "mode": mode, "utilisation": u.utilisation,
                         "mean_borrowed": u.mean_borrowed_gpus, "lost_gpu_h": u.lost_gpu_h,
                         "unmet_replica_min": outcome([tl]).unmet_replica_min})
    return rows


SURGE = Surge((HISTORY + 7) * DAY + 15 * 3600, 2 * 3600, 1.6)  # a Thursday afternoon


def two_weeks(seed: int) -> ServingSet:
    days = HISTORY + 14
    surge = SURGE
    holiday = (HISTORY + 4,)  # a Monday
    chat = demand_series(DemandShape(low=2, peak=14, noise=0.08, holidays=holiday,
                                     surges=(surge,)), days, STEP, seed=seed)
    code = demand_series(DemandShape(low=2, peak=16, weekend=0.4, noise=0.1, holidays=holiday),
                         days, STEP, seed=seed + 1)
    # pools sized for the peak with room for a surge (the static partition keeps all of it)
    deps = (Deployment("chat", tp=8, max_replicas=22, switch_in_s=900),
            Deployment("code", tp=2, max_replicas=20, switch_in_s=600))
    demand = {n: Demand(n, tuple((k * STEP, v) for k, v in enumerate(vals)))
              for n, vals in (("chat", chat), ("code", code))}
    return ServingSet(deps, demand)


def training_jobs(trace_day: int) -> list[Any]:
    from dataclasses import replace

    from railgang.daemon.sim.traces.philly import default_dir, read_philly

    root = Path(os.environ.get("RAILGANG_PHILLY_DIR", default_dir()))
    jobs = read_philly(root).jobs
    t0 = trace_day * DAY
    return [replace(j, submit_time=j.submit_time - t0) for j in jobs
            if t0 <= j.submit_time < t0 + 14 * DAY]


def backlog_jobs(count: int, nodes: int) -> list[Any]:
    """A permanent training backlog (the chapter's assumption): ``count`` elastic class-3 jobs
    (TP 8, 1-8 replicas) at the window's start, each with work for the whole window at 8
    replicas, so training always has more work queued than GPUs, lent ones included."""
    from railgang.daemon.sim.traces.model import TraceJob

    work_s = 14 * DAY * max(1.0, nodes / count)  # at 64 GPUs: longer than the window
    return [TraceJob(job_id=f"backlog{i:03d}", submit_time=float(i), gpus=64, duration_s=work_s,
                     tp=8, dp=8, elastic_min=1, elastic_max=8) for i in range(count)]


def boundary(sset: ServingSet, args: argparse.Namespace) -> list[dict[str, Any]]:
    from railgang.daemon.core.policies import registry
    from railgang.daemon.serving.simulate import compare, table
    from railgang.daemon.sim.progress import TopologyComm
    from railgang.topology.fabric import fabric_from_shape

    jobs = (backlog_jobs(args.backlog, args.training_nodes) if args.backlog
            else training_jobs(args.trace_day))
    fabric = fabric_from_shape(args.training_nodes + sum(pool_nodes(sset, 8).values()), 8, 4)
    knobs = ServingKnobs(history_days=HISTORY, forecast=ForecastConfig(buffer_quantile=args.q, holdout_days=HOLDOUT),
                         lend_rigid=args.lend_rigid)
    began = time.perf_counter()
    sides = compare(jobs, registry.get(args.policy), fabric, sset, knobs,
                    tuple(args.modes.split(",")), comm=TopologyComm(fabric))
    print("\n".join(table(sides)), file=sys.stderr)
    print(f"{len(jobs)} jobs, {time.perf_counter() - began:.0f} s", file=sys.stderr)
    rows = []
    for side in sides:
        out_, in_, dem = split_unmet(side.planned.timelines)
        rows.append({**side.row(), "unmet_outside_surge_share": out_ / dem,
                     "unmet_surge_replica_min": in_})
    return rows


def split_unmet(timelines: Any) -> tuple[float, float, float]:
    """Unmet replica-minutes outside the surge (the forecast's interval should hold there),
    inside it (the reactive path's cost), and the demand-minutes outside it."""
    start = (SURGE.start_s - HISTORY * DAY) / 60
    end = start + (SURGE.duration_s + 3600) / 60  # the surge and the hour after it
    outside = inside = demand = 0.0
    for tl in timelines:
        for k, (u, d) in enumerate(zip(tl.unmet, tl.demand, strict=True)):
            if start <= k < end:
                inside += u
            else:
                outside += u
                demand += d
    return outside, inside, demand


def buffer_curve(sset: ServingSet, max_buffer: int, q: float) -> list[dict[str, Any]]:
    knobs = ServingKnobs(history_days=HISTORY, forecast=ForecastConfig(buffer_quantile=q, holdout_days=HOLDOUT))
    expected = expect(sset, knobs)
    rows: list[dict[str, Any]] = []
    for b in range(max_buffer + 1):
        gpus = {d.name: b * d.tp for d in sset.deployments}
        tls: list[Any] = []
        for dep in sset.deployments:  # the same replicas of buffer for each deployment
            one = ServingSet((dep,), {dep.name: sset.demand[dep.name]})
            k = ServingKnobs(history_days=HISTORY, buffer_gpus=float(gpus[dep.name]),
                             forecast=knobs.forecast)
            tls += plan_window(one, "forecast", k, {dep.name: expected[dep.name]}).timelines
        got = outcome(tls)
        hours = len(tls[0].demand) / 60
        out_, in_, dem = split_unmet(tls)
        rows.append({"buffer_replicas": b, "buffer_gpus": sum(gpus.values()),
                     "unmet_outside_surge_share": out_ / dem, "unmet_surge_replica_min": in_,
                     "unmet_share": got.unmet_share, "unmet_replica_min": got.unmet_replica_min,
                     "late": got.late_replicas, "mean_lent_gpus": got.lent_gpu_h / hours})
    quantile = plan_window(sset, "forecast", knobs, expected)
    got = quantile.outcome
    out_, in_, dem = split_unmet(quantile.timelines)
    rows.append({"buffer_replicas": "quantile", "buffers": quantile.buffers,
                 "unmet_outside_surge_share": out_ / dem, "unmet_surge_replica_min": in_,
                 "buffer_gpus": sum(quantile.buffers[d.name] * d.tp for d in sset.deployments),
                 "unmet_share": got.unmet_share, "unmet_replica_min": got.unmet_replica_min,
                 "late": got.late_replicas,
                 "mean_lent_gpus": got.lent_gpu_h / (quantile.window_s / 3600)})
    return rows


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fixed = [r for r in rows if r["buffer_replicas"] != "quantile"]
    q = next(r for r in rows if r["buffer_replicas"] == "quantile")
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    xs = [r["buffer_gpus"] for r in fixed]
    ax.plot(xs, [100 * r["unmet_share"] for r in fixed], "o-", color="tab:red",
            label="demand-minutes unmet, all (%)")
    ax.plot(xs, [100 * r["unmet_outside_surge_share"] for r in fixed], "^-", color="tab:orange",
            label="unmet outside the surge (%)")
    ax.plot([q["buffer_gpus"]], [100 * q["unmet_outside_surge_share"]], "*", ms=14,
            color="black", label="the quantile buffer (q0.99 of held-back error)")
    ax.set_xlabel("safety buffer (GPUs, both deployments)")
    ax.set_ylabel("unmet demand-minutes (%)")
    ax.axhline(0.1, ls=":", color="grey")
    ax.annotate("goal: 0.1 %", (xs[-1], 0.1), textcoords="offset points", xytext=(-60, 4),
                fontsize=8, color="grey")
    ax2 = ax.twinx()
    ax2.plot(xs, [r["mean_lent_gpus"] for r in fixed], "s--", color="tab:blue",
             label="GPUs lent to training (mean)")
    ax2.set_ylabel("GPUs lent to training (mean)")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="center right", fontsize=8)
    ax.set_title("Two weeks of serving demand: buffer vs unmet demand and GPUs lent")
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--training-nodes", type=int, default=24)
    ap.add_argument("--trace-day", type=int, default=30, help="first Philly day replayed")
    ap.add_argument("--policy", default="default")
    ap.add_argument("--q", type=float, default=0.99, help="buffer quantile of the error")
    ap.add_argument("--max-buffer", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--parts", default="chapter,boundary,curve")
    ap.add_argument("--modes", default="static,forecast,reactive")
    ap.add_argument("--lend-rigid", action="store_true",
                    help="rigid class-3 jobs borrow any lent node too ([serving] lend_to_rigid)")
    ap.add_argument("--backlog", type=int, default=0,
                    help="instead of the Philly slice: this many elastic jobs always queued")
    ap.add_argument("--write-demand", type=Path, default=None,
                    help="also write the two-week demand as a demand CSV (railgang sim --serving)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    out: dict[str, Any] = {}
    if "chapter" in parts:
        out["chapter"] = chapter()
        print("| demand | mode | utilisation | GPUs borrowed (mean) | GPU-h lost | unmet |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        for r in out["chapter"]:
            print(f"| {r['demand']} | {r['mode']} | {r['utilisation']:.2%} | "
                  f"{r['mean_borrowed']:.1f} | {r['lost_gpu_h']:.1f} | {r['unmet_replica_min']:.0f} |")
    sset = two_weeks(args.seed)
    if args.write_demand is not None:
        from railgang.daemon.serving.synth import write_csv

        write_csv(args.write_demand, [(d.name, d.tp, d.switch_in_s,
                                       sset.demand[d.name].sampled(STEP)) for d in sset.deployments],
                  STEP, {d.name: d.max_replicas for d in sset.deployments})
    if "boundary" in parts:
        out["boundary"] = boundary(sset, args)
        print("\n| mode | utilisation | unmet demand-min (share) | unmet outside the surge | "
              "unmet in the surge (replica-min) | late replicas | reactive starts "
              "| GPU-h lent | training GPU-h | mean JCT (h) | finished | GPU-h lost | take-backs "
              "hitting jobs |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| ---: |")
        for r in out["boundary"]:
            print(f"| {r['mode']} | {r['utilisation']:.1%} | {r['serving_unmet_replica_min']:,.0f} "
                  f"({r['serving_unmet_share']:.3%}) | {r['unmet_outside_surge_share']:.3%} | "
                  f"{r['unmet_surge_replica_min']:,.0f} | {r['serving_late_replicas']} | "
                  f"{r['serving_reactive_starts']} | {r['lent_gpu_h']:,.0f} | "
                  f"{r['training_gpu_h']:,.0f} | {r['training_mean_jct_h']:.2f} | "
                  f"{r['training_finished']} | {r['training_lost_gpu_h']:,.1f} | "
                  f"{r['reclaims_with_jobs']} |")
    if "curve" in parts:
        out["curve"] = buffer_curve(sset, args.max_buffer, args.q)
        print("\n| buffer (replicas each) | buffer GPUs | unmet demand-min | share | outside the "
              "surge | in the surge (replica-min) | late | GPUs lent (mean) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in out["curve"]:
            print(f"| {r['buffer_replicas']} | {r['buffer_gpus']:.0f} | "
                  f"{r['unmet_replica_min']:,.0f} | {r['unmet_share']:.3%} | "
                  f"{r['unmet_outside_surge_share']:.3%} | {r['unmet_surge_replica_min']:,.0f} | "
                  f"{r['late']} | "
                  f"{r['mean_lent_gpus']:.1f} |")
        if args.png is not None:
            plot(out["curve"], args.png)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
