"""Fidelity of the simulator against the daemon on the real slurmctld (issue 33 item 6).

One stream of GPU jobs (``slurm_placement_stream.make_stream``'s arrivals and sizes, run times
redrawn heavy-tailed) runs through the railgang daemon on a local Slurm 22.05 cluster, once per
policy (``default`` and ``fifo``, a fresh cluster each), and the same stream is replayed by
``railgang sim`` on the same fleet and topology with the daemon's cycle settings. Reported per
policy: start-order agreement (Kendall's tau-b over start times), per-job wait difference (live
- sim: mean, p50, p95), same-leaf agreement of multi-node jobs, mean wait live vs sim; and the
``default``/``fifo`` mean-JCT ratio live vs in the simulator.

Each run is replayed three times by the simulator: ``nominal`` (the stream's own submit times and
run times, what a user would replay), ``as_run`` (each job's submit time and run time as sacct
recorded them live, in sacct's whole seconds), and ``latency`` (nominal, with Slurm's own latency
from a Start to a running job, measured on this run by ``start_latency``, added to every run time
and to every simulated start: a started job holds its GPUs while Slurm launches it).

    .venv/bin/python -m benchmarks.slurm.live_vs_sim --nodes 32 --jobs 200           # the measurement
    .venv/bin/python -m benchmarks.slurm.live_vs_sim --nodes 16 --jobs 30 --time-scale 0.3   # smoke
    .venv/bin/python -m benchmarks.slurm.live_vs_sim --reuse DIR    # compare again from saved live runs

The live rows of each run are saved in ``--dir`` (live-<policy>.json) so the comparison can be
redone without the cluster. Runs as root (the cluster is real); ports from
``RAILGANG_TEST_PORT_BASE`` (or ``--port-base``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import hostlist

from benchmarks.slurm.slurm_placement_stream import (
    StreamJob,
    accounting,
    make_stream,
    run_stream,
    start_daemon,
)
from railgang.daemon.config import DaemonSettings

# the daemon's settings `railgang --config FILE sim` builds its cycle from (daemon/cycle_settings.py
# cycle_from, as `daemon run` does); the others (preemption grace and churn, resize interval,
# estimates, emitted priorities) are the live backend's, not the cycle's
SIM_KEYS = ("policy", "cycle_interval_s", "seed", "preempt", "resize", "preempt_grace_s", "preempt_churn_cap",
            "resize_min_interval_s", "leaf_wait_s", "leaf_holds", "leaf_wait_max_s",
            "whole_leaf_first", "backfill_held_leaf", "whole_domain_evict", "defrag",
            "domain_patience_s", "churn_burst_gpus", "fair_share", "fair_share_half_life_s")


@dataclass(frozen=True)
class Run:
    """One job as it ran (live, from sacct) or as the simulator replayed it; seconds from the
    first submit. ``one_leaf`` is None for a job on one node."""

    name: str
    submit_s: float
    start_s: float
    end_s: float
    one_leaf: bool | None

    @property
    def wait_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def jct_s(self) -> float:
        return self.end_s - self.submit_s


# --- the comparison (pure; tests/daemon/sim/test_live_vs_sim.py) -----------------------------

def kendall_tau(a: Sequence[float], b: Sequence[float]) -> float:
    """Kendall's tau-b of two paired samples (ties in either count as neither concordant nor
    discordant, and shrink the denominator): 1 same order, -1 reversed. O(n^2), fine for a few
    hundred jobs."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} != {len(b)} values")
    conc = disc = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = a[i] - a[j], b[i] - b[j]
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif (da > 0) == (db > 0):
                conc += 1
            else:
                disc += 1
    denom = math.sqrt((conc + disc + ties_a) * (conc + disc + ties_b))
    return (conc - disc) / denom if denom else 1.0


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0..1), as the other benchmarks report p95."""
    s = sorted(values)
    return s[int(q * (len(s) - 1))]


def wait_difference(live: dict[str, Run], sim: dict[str, Run]) -> dict[str, float]:
    """Per-job wait live minus sim over the jobs both ran: signed mean/p50/p95, the p50/p95 of the
    absolute difference, and the mean waits with their gap in percent of the live mean."""
    both = sorted(live.keys() & sim.keys())
    diff = [live[n].wait_s - sim[n].wait_s for n in both]
    live_mean = statistics.fmean(live[n].wait_s for n in both)
    sim_mean = statistics.fmean(sim[n].wait_s for n in both)
    return {
        "jobs": len(both), "diff_mean_s": statistics.fmean(diff),
        "diff_p50_s": percentile(diff, 0.5), "diff_p95_s": percentile(diff, 0.95),
        "absdiff_p50_s": percentile([abs(d) for d in diff], 0.5),
        "absdiff_p95_s": percentile([abs(d) for d in diff], 0.95),
        "live_wait_mean_s": live_mean, "sim_wait_mean_s": sim_mean,
        "wait_gap_pct": 100 * (sim_mean - live_mean) / live_mean if live_mean else 0.0,
    }


def same_leaf(live: dict[str, Run], sim: dict[str, Run]) -> dict[str, float]:
    """Multi-node jobs (``one_leaf`` not None on both sides): the share placed alike (both inside
    one leaf, or both spread), and each side's share inside one leaf."""
    both = [n for n in sorted(live.keys() & sim.keys())
            if live[n].one_leaf is not None and sim[n].one_leaf is not None]
    if not both:
        return {"multi_node_jobs": 0, "agree_pct": 100.0, "live_one_leaf_pct": 0.0,
                "sim_one_leaf_pct": 0.0}
    return {
        "multi_node_jobs": len(both),
        "agree_pct": 100 * sum(live[n].one_leaf == sim[n].one_leaf for n in both) / len(both),
        "live_one_leaf_pct": 100 * sum(bool(live[n].one_leaf) for n in both) / len(both),
        "sim_one_leaf_pct": 100 * sum(bool(sim[n].one_leaf) for n in both) / len(both),
    }


def start_latency(live: dict[str, Run], sim: dict[str, Run], cycle_s: float) -> float:
    """Slurm's own latency from a decision to a running job, as this run showed it: the median
    of live wait minus simulated wait over the jobs the simulator started within one cycle of
    their submit (no queue in front of them, so the difference is the path daemon Start ->
    slurmctld -> slurmd -> sacct, not the order). 0 when no job qualifies."""
    gaps = [live[n].wait_s - sim[n].wait_s for n in sorted(live.keys() & sim.keys())
            if sim[n].wait_s <= cycle_s]
    return max(0.0, statistics.median(gaps)) if gaps else 0.0


def compare(live: dict[str, Run], sim: dict[str, Run]) -> dict[str, float]:
    both = sorted(live.keys() & sim.keys())
    tau = kendall_tau([live[n].start_s for n in both], [sim[n].start_s for n in both])
    return {"kendall_tau": tau, **wait_difference(live, sim),
            **{f"leaf_{k}": v for k, v in same_leaf(live, sim).items()},
            "live_jct_mean_s": statistics.fmean(live[n].jct_s for n in both),
            "sim_jct_mean_s": statistics.fmean(sim[n].jct_s for n in both)}


# --- the stream, the live run and the replay --------------------------------------------------

def heavy_tailed(jobs: list[StreamJob], seed: int, time_scale: float) -> list[StreamJob]:
    """The stream's jobs with log-normal run times (sigma 1: a few jobs run 5-10x the median)
    of the same mean (30 s x time_scale) as make_stream's uniform ones, so the offered load it
    computed still holds; at least 2 s x time_scale so Slurm's launch is not most of a job."""
    rng = random.Random(seed * 7919 + 33)
    mu = math.log(30.0 * time_scale) - 0.5
    return [replace(j, duration_s=round(min(max(rng.lognormvariate(mu, 1.0), 2.0 * time_scale),
                                            300.0 * time_scale), 1)) for j in jobs]


def live_runs(rows: list[dict[str, Any]], ids: dict[str, str],
              leaf_of: dict[str, str]) -> dict[str, Run]:
    """sacct rows as Runs, times from the first submit (sacct records whole seconds)."""
    t0 = min(r["time"]["submission"] for r in rows)
    out = {}
    for r in rows:
        t = r["time"]
        nodes = hostlist.expand_hostlist(r["nodes"])
        one = len({leaf_of[n] for n in nodes}) == 1 if len(nodes) > 1 else None
        name = ids[str(r["job_id"])]
        out[name] = Run(name, t["submission"] - t0, t["start"] - t0, t["end"] - t0, one)
    return out


def write_trace(path: Path, jobs: list[tuple[str, float, int, float, int]]) -> None:
    """(name, submit, gpus, duration, tp) rows as a `railgang sim` CSV trace."""
    with path.open("w") as f:
        f.write("job_id,submit_time,gpus,duration_s,account,tp,pp,dp\n")
        for name, submit, gpus, duration, tp in sorted(jobs, key=lambda j: (j[1], j[0])):
            f.write(f"{name},{submit:.3f},{gpus},{duration:.3f},team-a,{tp},1,{gpus // tp}\n")


def trace_rows(stream: list[StreamJob], live: dict[str, Run] | None,
               latency_s: float = 0.0) -> list[tuple[str, float, int, float, int]]:
    """The stream as trace rows: nominal, or with each job's submit and run time as sacct saw
    them live (``live``), or each run ``latency_s`` longer (a started job holds its GPUs while
    Slurm launches it)."""
    rows = []
    for j in stream:
        name, gpus = f"s{j.index:03d}", j.nodes * j.gpus_per_node
        tp = 8 if j.gpus_per_node == 8 else 1
        submit, duration = j.arrival_s, j.duration_s
        if live is not None and name in live:
            submit, duration = live[name].submit_s, max(0.5, live[name].end_s - live[name].start_s)
        rows.append((name, submit, gpus, duration + latency_s, tp))
    return rows


def settings_toml(settings: DaemonSettings) -> str:
    """The daemon's cycle settings as a `--config` file's [daemon] table."""
    lines = ["[daemon]"]
    for key in SIM_KEYS:
        value = getattr(settings, key)
        if value is None:
            continue
        lines.append(f"{key} = " + (json.dumps(value) if isinstance(value, str)
                                    else str(value).lower() if isinstance(value, bool)
                                    else repr(value)))
    return "\n".join(lines) + "\n"


def simulate(trace: Path, policy: str, settings: DaemonSettings, nodes: int, gpus_per_node: int,
             leaf: int, out: Path) -> dict[str, Run]:
    """``railgang --config FILE sim`` on the trace, FILE the daemon's own settings (policy, leaf
    wait, preemption rules), plus what only the simulator has: the daemon's cycle as quantum and
    as tick (the daemon decides every cycle_interval_s whether or not anything changed), and comm
    share 0 (every job is a sleep: a spread gang does not run slower live)."""
    config = out.with_suffix(".toml")
    config.write_text(settings_toml(settings.model_copy(update={"policy": policy})))
    argv = [str(Path(sys.executable).with_name("railgang")), "--config", str(config), "sim",
            "--trace", str(trace), "--nodes", str(nodes), "--gpus-per-node", str(gpus_per_node),
            "--leaf", str(leaf), "--cycle-s", str(settings.cycle_interval_s),
            "--tick-s", str(settings.cycle_interval_s), "--comm-share", "0", "-q",
            "--jobs-csv", str(out), "--json"]
    subprocess.run(argv, check=True, capture_output=True, timeout=600)
    runs = {}
    with out.open() as f:
        for row in csv.DictReader(f):
            if not row["start_s"]:
                continue
            multi = int(row["gpus"]) > gpus_per_node
            one = (row["first_leaves"] == "1") if multi else None
            runs[row["job_id"]] = Run(row["job_id"], float(row["submit_s"]), float(row["start_s"]),
                                      float(row["finish_s"]), one)
    return runs


def run_live(args: argparse.Namespace, policy: str, settings: DaemonSettings,
             stream: list[StreamJob]) -> dict[str, object]:
    """The stream through the daemon (``policy``) on a fresh cluster; sacct's rows and the load."""
    from railgang.devcluster.cluster import DevCluster
    from railgang.devcluster.layout import ClusterSpec

    base = args.port_base
    spec = ClusterSpec(dir=args.dir / "cluster", nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                       nodes_per_leaf=args.leaf, slurmctld_port=base, slurmdbd_port=base + 2,
                       mariadb_port=base - 511, slurmd_base_port=base + 83)
    cluster = DevCluster(spec)
    cluster.down()
    cluster.up()
    for stale in ("railgang.sqlite", "speed.json", "failures.json"):
        (spec.dir / stale).unlink(missing_ok=True)
    # the daemon's policy and state files through the environment start_daemon passes on
    os.environ["RAILGANG_DAEMON__POLICY"] = policy
    os.environ["RAILGANG_DAEMON__SPEED_FILE"] = str(spec.dir / "speed.json")
    os.environ["RAILGANG_DAEMON__SEED"] = str(settings.seed)
    daemon = start_daemon(spec, settings.cycle_interval_s, settings.leaf_wait_s, settings.leaf_holds,
                          settings.whole_leaf_first)
    load_before = os.getloadavg()
    try:
        t0 = time.monotonic()
        ids = run_stream(cluster, stream, "railgang")
        wall = time.monotonic() - t0
        rows = accounting(cluster, ids)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        cluster.down()
    leaf_of = {n: leaf for leaf, members in spec.leaves for n in members}
    runs = live_runs(rows, ids, leaf_of)
    return {"policy": policy, "wall_s": wall, "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(), "runs": [asdict(r) for r in runs.values()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--leaf", type=int, default=8, help="nodes per leaf switch")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--load", type=float, default=1.05, help="offered load (1.0 = all GPUs)")
    ap.add_argument("--time-scale", type=float, default=1.0, help="x every run time (mean 30 s)")
    ap.add_argument("--policies", default="default,fifo")
    ap.add_argument("--cycle-s", type=float, default=2.0, help="daemon.cycle_interval_s")
    ap.add_argument("--leaf-wait-s", type=float, default=None, help="daemon.leaf_wait_s")
    ap.add_argument("--dir", type=Path,
                    default=Path(os.environ.get("RAILGANG_TEST_ROOT", "/tmp")) / "live-vs-sim")
    ap.add_argument("--port-base", type=int,
                    default=int(os.environ.get("RAILGANG_TEST_PORT_BASE", "29817")))
    ap.add_argument("--reuse", action="store_true",
                    help="no cluster: compare again from the live-<policy>.json files in --dir")
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    args.dir.mkdir(parents=True, exist_ok=True)
    stream = heavy_tailed(make_stream(args.jobs, args.seed, args.nodes * args.gpus_per_node,
                                      args.load, args.time_scale), args.seed, args.time_scale)
    result: dict[str, object] = {"nodes": args.nodes, "gpus_per_node": args.gpus_per_node,
                                 "leaf": args.leaf, "jobs": args.jobs, "seed": args.seed,
                                 "load": args.load, "time_scale": args.time_scale}
    jct: dict[str, dict[str, float]] = {}
    for policy in policies:
        extra = {} if args.leaf_wait_s is None else {"leaf_wait_s": args.leaf_wait_s}
        settings = DaemonSettings(policy=policy, cycle_interval_s=args.cycle_s, **extra)
        saved = args.dir / f"live-{policy}.json"
        if not args.reuse:
            saved.write_text(json.dumps(run_live(args, policy, settings, stream)))
        doc = json.loads(saved.read_text())
        live = {r["name"]: Run(**r) for r in doc["runs"]}
        out: dict[str, object] = {"wall_s": doc["wall_s"], "loadavg_before": doc["loadavg_before"],
                                  "loadavg_after": doc["loadavg_after"], "live_jobs": len(live)}
        latency = 0.0
        for replay in ("nominal", "as_run", "latency"):
            rows = trace_rows(stream, live if replay == "as_run" else None,
                              latency if replay == "latency" else 0.0)
            trace = args.dir / f"trace-{policy}-{replay}.csv"
            write_trace(trace, rows)
            sim = simulate(trace, policy, settings, args.nodes, args.gpus_per_node, args.leaf,
                           args.dir / f"sim-{policy}-{replay}.csv")
            if replay == "nominal":
                latency = out["start_latency_s"] = start_latency(live, sim, args.cycle_s)
            if replay == "latency":  # the sim's decision is when Slurm is asked; it runs later
                sim = {n: replace(r, start_s=r.start_s + latency) for n, r in sim.items()}
            out[replay] = compare(live, sim)
            jct.setdefault(replay, {})[policy] = out[replay]["sim_jct_mean_s"]  # type: ignore[index]
            jct.setdefault("live", {})[policy] = out[replay]["live_jct_mean_s"]  # type: ignore[index]
        result[policy] = out
    if "default" in policies and "fifo" in policies:
        ratio = {k: v["default"] / v["fifo"] for k, v in jct.items()}
        result["default_over_fifo_jct"] = ratio | {
            f"gap_{k}_pct": 100 * (ratio[k] - ratio["live"]) / ratio["live"]
            for k in ratio if k != "live"}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
