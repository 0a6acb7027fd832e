"""How good and how fast is `railgang explain`'s start-time estimate (issue 9 part 3).

    .venv/bin/python -m benchmarks.core.start_estimate [--philly-jobs 1500] [--philly-start 0]
        [--synthetic-jobs 600] [--synthetic-seed 1] [--moments 12] [--policy default]
        [--wall-s 1.0] [--samples 8] [--queue 1000] [--deep-jobs 0 --deep-load 1.5
        --min-queue 200]

1. Error: replays a slice of the Philly-derived trace (../shared/traces/philly-gavel or
   $RAILGANG_PHILLY_DIR, the philly-gavel loader) and a seeded synthetic trace through the
   simulator; at evenly spaced moments it estimates every waiting job from the replay's own
   snapshot, then compares with when the replay started it (daemon/service/estimate_error.py):
   median and p90 absolute error, coverage of the p10-p90 interval, per run-time source.
   With --deep-jobs, also a synthetic trace loaded past capacity, estimated only at moments with
   at least --min-queue waiting: there the 1 s budget leaves most jobs to the GPU-count profile,
   and the table splits the jobs the simulation reached from those the profile placed.
2. Speed: a queue of --queue jobs on a 1,024-GPU cluster (the Philly jobs arriving twenty
   times faster, the state replayed with fifo), estimated the way the daemon does (every waiting job, one wall-clock budget) and
   for single jobs at several queue positions.

Prints Markdown for BENCHMARKS.md (with `uptime`'s load average).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies import registry
from railgang.daemon.service.estimate import EstimateConfig, estimate_starts
from railgang.daemon.service.estimate_error import (
    VARIANTS,
    Measurement,
    measure,
    synthetic,
    with_time_limits,
)
from railgang.daemon.sim.backend import SimBackend, SimConfig
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.traces.philly import default_dir, read_philly
from railgang.topology.fabric import fabric_from_shape


def table(name: str, m: Measurement, *, by_source: bool = False) -> list[str]:
    """One row per run-time source; with ``by_source``, one per source and where the estimate
    came from: the simulation reached the job, or the GPU-count profile placed it."""
    rows = [f"**{name}**: {m.moments} moments, waiting jobs per moment {min(m.queue, default=0)}"
            f"-{max(m.queue, default=0)}, replay {m.replay_s:.0f} s", "",
            "| run times from | estimates from | predictions | estimated & started | median abs "
            "err h | p90 abs err h | p10-p90 covers: raw / as shown / once calibrated (n; 90 % "
            "CI over moments) | "
            "median width h of those n: raw / as shown | median actual wait h | censored (lower "
            "bound held) | estimate ms median / max |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for v in VARIANTS:
        for source in (None, "simulated", "profile") if by_source else (None,):
            s = m.summary(v, source)
            ci = "-".join(f"{x:.2f}" for x in s["coverage_ci"]) if s["coverage_ci"] else "-"
            rows.append(f"| {v} | {source or 'all'} | {s['predictions']} | {s['estimated']} | "
                        f"{s['median_err_h']} | {s['p90_err_h']} | {s['coverage']} / "
                        f"{s['coverage_shown']} / {s['coverage_once_calibrated']} "
                        f"({s['calibrated']}; 90 % CI {ci}) | {s['width_raw_h']} / {s['width_shown_h']} | "
                        f"{s['median_actual_wait_h']} | {s['censored']} ({s['censored_held']}) | "
                        f"{s['wall_ms_median']} / {s['wall_ms_max']} |")
    return rows


def big_queue(jobs: list[Any], queue: int) -> Snapshot:
    """The first snapshot of a fast-arriving replay with at least ``queue`` waiting jobs (the
    state is built with fifo, quick to replay; the estimate then uses the production policy)."""
    fabric = fabric_from_shape(128, 8, 8)
    fast = [dataclasses.replace(tj, submit_time=tj.submit_time / 20) for tj in jobs]

    class Found(Exception):
        def __init__(self, snap: Snapshot) -> None:
            self.snap = snap

    def grab(now: float, backend: SimBackend) -> None:
        if len(backend.pending) >= queue:
            snap = backend.snapshot(now)
            raise Found(snap.replace(pending=snap.pending[:queue]))  # stop the replay here

    try:
        simulate(fast, registry.get("fifo"), fabric, config=EngineConfig(
            sim=SimConfig(oracle=False), cycle_s=60.0), observer=grab)
    except Found as found:
        return found.snap
    raise SystemExit(f"the replay never queued {queue} jobs; use more --philly-jobs")


def speed(snap: Snapshot, policy: str, config: EstimateConfig) -> list[str]:
    rows = [f"**Speed**: {len(snap.pending)} waiting, {len(snap.running)} running on 1,024 GPUs "
            f"({snap.free_gpus} free)", "",
            "| what is estimated | wall ms | estimated | of which on the profile | budget (lower "
            "bound) | beyond horizon | simulations | simulated cycles | ms per cycle |",
            "|---|---|---|---|---|---|---|---|---|"]

    def run(label: str, targets: list[str] | None, cfg: EstimateConfig) -> Any:
        t = time.perf_counter()
        e = estimate_starts(snap, registry.get(policy), config=cfg, targets=targets)
        ms = (time.perf_counter() - t) * 1e3
        status = [j.status for j in e.jobs.values()]
        profiled = sum("profile" in j.note for j in e.jobs.values())
        rows.append(f"| {label} | {ms:.0f} | {status.count('estimated')} | {profiled} | "
                    f"{status.count('budget')} | {status.count('beyond_horizon')} | "
                    f"{e.simulations} | {e.cycles} | {ms / max(1, e.cycles):.0f} |")
        return e

    run(f"every waiting job, the profile off (before issue 24), wall budget {config.wall_s:g} s",
        None, dataclasses.replace(config, profile=False))
    for budget in (config.wall_s, 2.0, 5.0):
        label = "the daemon's refresh" if budget == config.wall_s else "a larger budget"
        e = run(f"every waiting job ({label}), wall budget {budget:g} s", None,
                dataclasses.replace(config, wall_s=budget))
    # single jobs, picked by when the 5 s estimate starts them (queue position says little
    # under a reordering policy)
    first = sorted((j.start_s, j.job_id) for j in e.jobs.values() if j.start_s is not None)
    for k in (1, 10, 50):
        if k <= len(first):
            run(f"one job alone: the {k}th to start ({first[k - 1][0] / 3600:.1f} h), budget "
                f"{config.wall_s:g} s", [first[k - 1][1]], config)
    return rows


def explain_speed(jobs: list[Any], queue: int) -> list[str]:
    """The daemon's cycle with estimates on a queue of ``queue`` jobs (SQLite), then what
    `railgang explain JOBID --json` costs: the command only reads the row the cycle wrote."""
    import subprocess
    import tempfile

    from railgang.daemon.clock import SimClock
    from railgang.daemon.core.cycle import CycleConfig
    from railgang.daemon.service.cycle import DaemonService
    from railgang.daemon.service.estimate import StartEstimator
    from railgang.daemon.sim.live import LiveSim
    from railgang.db import migrate
    from railgang.db.session import make_engine

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/rg.sqlite"
        migrate.upgrade(url)
        engine = make_engine(url)
        t0 = float(int(time.time()))
        now_jobs = [dataclasses.replace(tj, submit_time=0.0) for tj in jobs[:queue]]
        svc = DaemonService(engine=engine, backend=LiveSim(fabric_from_shape(128, 8, 8),
                                                           now_jobs, start=t0),
                            policy=registry.get("default"), clock=SimClock(t0), leader="bench",
                            config=CycleConfig(), estimator=StartEstimator("default"))
        report = svc.run_once()
        waiting = svc.estimator.last.jobs if svc.estimator and svc.estimator.last else {}
        job = next(iter(waiting))
        env = {**os.environ, "RAILGANG_CONFIG": "", "RAILGANG_DB__URL": url}
        exe = str(Path(sys.executable).with_name("railgang"))
        from railgang.daemon.config import load_settings
        from railgang.daemon.service.status import explanation, render

        settings = load_settings(db={"url": url})
        t = time.perf_counter()
        for _ in range(20):
            render(explanation(settings, job))
        in_process_ms = (time.perf_counter() - t) / 20 * 1e3
        runs = []
        for _ in range(3):
            t = time.perf_counter()
            subprocess.run([exe, "explain", job, "--json"], env=env, check=True,
                           capture_output=True)
            runs.append(time.perf_counter() - t)
        engine.dispose()
    est = svc.estimator.last if svc.estimator else None
    reached = sum(e.status == "estimated" for e in waiting.values())
    return [f"**The daemon and `railgang explain` on a {queue}-job queue** (1,024 GPUs, every job "
            f"queued at once): the cycle took {report.timings_ms['total']:.0f} ms, of which "
            f"recording (explanations + the estimate) {report.timings_ms.get('record', 0):.0f} ms "
            f"and the estimate itself {est.wall_ms if est else 0:.0f} ms "
            f"({reached} of {len(waiting)} waiting jobs estimated, the rest a budget lower "
            f"bound); `railgang explain {job} --json` took "
            f"{', '.join(f'{r:.2f}' for r in runs)} s (process start and imports included; "
            f"`railgang --help` alone takes about as long), reading and rendering the row "
            f"in process {in_process_ms:.1f} ms"]


def error_tables(args: argparse.Namespace, config: EstimateConfig, philly: Sequence[Any],
                 emit: Callable[[list[str]], None]) -> None:
    """The error measurements asked for: a Philly slice, a synthetic trace, deep queues."""

    def dump(trace: str, m: Measurement) -> None:
        if args.dump is not None:
            with args.dump.open("a") as f:
                for p in m.predictions:
                    f.write(json.dumps({"trace": trace, **dataclasses.asdict(p)}) + "\n")

    if args.philly_jobs:
        jobs = with_time_limits(philly[args.philly_start:args.philly_start + args.philly_jobs])
        m = measure(jobs, fabric_from_shape(args.philly_nodes, 8, 8), policy=args.policy,
                    moments=args.moments, config=config)
        dump("philly", m)
        emit([*table(f"Philly-derived, jobs {args.philly_start:,}-"
                     f"{args.philly_start + len(jobs):,}, {args.philly_nodes * 8} GPUs "
                     f"({args.philly_nodes} × 8, 8 per leaf)", m), ""])
    if args.synthetic_jobs:
        syn = with_time_limits(synthetic(args.synthetic_jobs, gpus=128, load=1.2,
                                         seed=args.synthetic_seed))
        m = measure(syn, fabric_from_shape(16, 8, 4), policy=args.policy, moments=args.moments,
                    config=config)
        dump("synthetic", m)
        emit([*table(f"Synthetic (seed {args.synthetic_seed}), {len(syn)} jobs at load 1.2, "
                     "128 GPUs (16 × 8, 4 per leaf)", m), ""])
    if args.deep_jobs:
        deep = with_time_limits(synthetic(args.deep_jobs, gpus=128, load=args.deep_load,
                                          seed=args.synthetic_seed))
        m = measure(deep, fabric_from_shape(16, 8, 4), policy=args.policy,
                    moments=args.moments, config=config, min_queue=args.min_queue)
        dump("deep", m)
        emit([*table(f"Deep queues: synthetic (seed {args.synthetic_seed}), {len(deep)} jobs at "
                     f"load {args.deep_load:g}, 128 GPUs, moments with at least "
                     f"{args.min_queue} waiting", m, by_source=True), ""])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--philly-jobs", type=int, default=1500)
    ap.add_argument("--philly-nodes", type=int, default=56)
    ap.add_argument("--philly-start", type=int, default=0,
                    help="the Philly slice starts at this job (another slice: 1500)")
    ap.add_argument("--synthetic-jobs", type=int, default=600)
    ap.add_argument("--synthetic-seed", type=int, default=1)
    ap.add_argument("--deep-jobs", type=int, default=0,
                    help="also a synthetic trace of this many jobs at --deep-load whose queue "
                         "grows to hundreds, estimated at --wall-s with the profile (deep queues)")
    ap.add_argument("--deep-load", type=float, default=1.5)
    ap.add_argument("--min-queue", type=int, default=200,
                    help="deep queues: moments with fewer waiting are passed over")
    ap.add_argument("--moments", type=int, default=12)
    ap.add_argument("--policy", default="default", choices=registry.names())
    ap.add_argument("--wall-s", type=float, default=1.0)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--queue", type=int, default=1000)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--only-speed", action="store_true")
    ap.add_argument("--dump", type=Path, default=None,
                    help="also write every prediction as JSON lines here (offline analysis)")
    ap.add_argument("--profile-order", choices=("policy", "queue"), default="policy",
                    help="the profile's order: the policy's (classes first) or submit order")
    ap.add_argument("--no-profile", action="store_true",
                    help="no GPU-count profile past the simulation's budget (a lower bound instead)")
    args = ap.parse_args()
    config = EstimateConfig(samples=args.samples, wall_s=args.wall_s, profile=not args.no_profile,
                            profile_order=args.profile_order)
    path = default_dir()
    if not (path / "simulation_throughputs.json").is_file():
        raise SystemExit(f"Philly-derived trace not found at {path}: check out ../shared or set "
                         "RAILGANG_PHILLY_DIR")
    philly = read_philly(path).jobs

    def emit(lines: list[str]) -> None:
        print("\n".join(lines), flush=True)

    emit([f"`{' '.join(['benchmarks/core/start_estimate.py', *sys.argv[1:]])}`, policy "
           f"{args.policy}, {args.samples} sampled draws + the median one, wall budget "
           f"{args.wall_s:g} s per estimate, load average before: "
           f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", ""])
    if args.only_speed:
        limited = list(with_time_limits(philly[:4000]))
        emit(explain_speed(limited, args.queue))
        emit(["", *speed(big_queue(limited, args.queue), args.policy, config)])
        return
    error_tables(args, config, philly, emit)
    if not args.skip_speed:
        snap = big_queue(list(with_time_limits(philly[:4000])), args.queue)
        emit(["", *speed(snap, args.policy, config)])
    emit(["", f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"])


if __name__ == "__main__":
    main()
