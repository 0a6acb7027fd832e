"""Placement on the real slurmctld: one stream of mixed GPU jobs, submitted to a local cluster of
64 nodes x 8 GPUs in leaves of 8 under one spine, measured from Slurm's own accounting.

Modes (the same stream each time, a fresh cluster each time):

  plain      Slurm 22.05 places every job itself (topology/tree, cons_tres, backfill): the baseline.
  switches   the same, with ``--switches=1`` on multi-node jobs (stay inside one leaf, wait longer).
  railgang   the railgang daemon (CLI backend) places the hinted jobs; Slurm runs them.

  states     no stream: the cluster is loaded to a given occupancy (filler jobs pinned to nodes,
             a few nodes drained as quarantined), then one gang is submitted; where the real
             slurmctld puts it is shown beside the transcribed cons_tres/topology-tree baseline
             (``benchmarks.baselines.slurm_tree``) and railgang on the same state, each with
             the physical model's step time (``--states N --occupancy F``).

Reported per mode: share of multi-node jobs inside one leaf, leaves per multi-node job, mean and
p95 wait (submit -> start), makespan, and the modeled 1 GB ring all-reduce of every multi-node job
over the GPUs it got (``railgang.topology.comm_model``).

    .venv/bin/python -m benchmarks.slurm.slurm_placement_stream --mode plain --jobs 200
    .venv/bin/python -m benchmarks.slurm.slurm_placement_stream --mode switches --jobs 200
    .venv/bin/python -m benchmarks.slurm.slurm_placement_stream --mode railgang --jobs 200
    .venv/bin/python -m benchmarks.slurm.slurm_placement_stream --mode railgang --leaf-wait-s 0  # no leaf wait
    .venv/bin/python -m benchmarks.slurm.slurm_placement_stream --mode states --states 12 --occupancy 0.5

In railgang mode the daemon runs with its defaults unless ``--leaf-wait-s``/``--leaf-holds`` set
``daemon.leaf_wait_s``/``daemon.leaf_holds`` (docs/policies.md "Keeping gangs inside one leaf").

Runs as root (the cluster is real). Each job is ``sleep`` for its duration, so a 200-job stream
takes a few minutes of wall time per mode; ``--time-scale`` shortens or stretches every duration.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hostlist

from benchmarks.slurm.placement_states import run_states
from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.devcluster.layout import ClusterSpec
from railgang.topology.comm_model import ring_allreduce_time_s
from railgang.topology.fabric import fabric_from_shape

# (weight, nodes, GPUs per node): whole-node gangs of 1/2/4/8 nodes and one/two-GPU jobs, the mix
# of the plain-Slurm measurement this benchmark repeats
MIX = ((30, 1, 1), (15, 1, 2), (20, 1, 8), (15, 2, 8), (12, 4, 8), (8, 8, 8))


@dataclass(frozen=True)
class StreamJob:
    index: int
    arrival_s: float
    duration_s: float
    nodes: int
    gpus_per_node: int

    def argv(self, mode: str) -> list[str]:
        tp = min(8, self.gpus_per_node) if self.gpus_per_node == 8 else 1
        dp = self.nodes * self.gpus_per_node // tp
        argv = ["sbatch", "--parsable", "--account=team-a", f"--job-name=s{self.index:03d}",
                f"--nodes={self.nodes}", f"--gres=gpu:{self.gpus_per_node}",
                f"--rg-parallel=tp{tp},dp{dp}", "--output=/dev/null",
                f"--time={max(1, int(self.duration_s * 3 // 60) + 1)}"]
        if mode == "switches" and self.nodes > 1:
            argv.append("--switches=1@10:00")
        return [*argv, f"--wrap=sleep {self.duration_s:.1f}"]


def make_stream(n: int, seed: int, gpus: int, load: float, time_scale: float) -> list[StreamJob]:
    """``n`` jobs, Poisson arrivals at an offered load of ``load`` x the cluster's GPUs."""
    rng = random.Random(seed)
    shapes = [(nodes, per) for _, nodes, per in MIX]
    weights = [w for w, _, _ in MIX]
    jobs, t = [], 0.0
    drafts = []
    for i in range(n):
        nodes, per = rng.choices(shapes, weights=weights)[0]
        drafts.append((i, nodes, per, rng.uniform(10, 50) * time_scale))
    mean_gpu_s = statistics.fmean(nodes * per * d for _, nodes, per, d in drafts)
    rate = load * gpus / mean_gpu_s  # arrivals per second that offer `load` of the GPUs
    for i, nodes, per, duration in drafts:
        jobs.append(StreamJob(i, t, duration, nodes, per))
        t += rng.expovariate(rate)
    return jobs


def run_stream(cluster: DevCluster, jobs: list[StreamJob], mode: str) -> dict[str, str]:
    env = slurm_env(cluster.spec)
    ids: dict[str, str] = {}
    t0 = time.monotonic()
    for job in jobs:
        delay = job.arrival_s - (time.monotonic() - t0)
        if delay > 0:
            time.sleep(delay)
        res = subprocess.run(job.argv(mode), capture_output=True, text=True, env=env, timeout=60,
                             check=True)
        ids[res.stdout.strip().split(";")[0]] = f"s{job.index:03d}"
    while True:  # wait for the queue to drain
        out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                             env=env, timeout=60, check=True).stdout.split()
        if not set(out) & set(ids):
            return ids
        time.sleep(2)


def accounting(cluster: DevCluster, ids: dict[str, str]) -> list[dict[str, Any]]:
    env = slurm_env(cluster.spec)
    for _ in range(30):  # slurmdbd catches up a moment after the last job ends
        doc = json.loads(subprocess.run(["sacct", "--json", "-a", "-S", "now-2hours"],
                                        capture_output=True, text=True, env=env, timeout=60,
                                        check=True).stdout)
        rows = [j for j in doc.get("jobs", []) if str(j["job_id"]) in ids
                and j["state"]["current"] == "COMPLETED"]
        if len(rows) >= len(ids):
            return rows
        time.sleep(2)
    return rows


def measure(rows: list[dict[str, Any]], spec: ClusterSpec) -> dict[str, float]:
    fabric = fabric_from_shape(spec.nodes, spec.gpus_per_node, spec.nodes_per_leaf)
    leaf_of = {n: leaf for leaf, members in spec.leaves for n in members}
    waits, multi_in_leaf, multi_leaves, allreduce = [], [], [], []
    starts, ends, submits = [], [], []
    for r in rows:
        t = r["time"]
        submit, start, end = t["submission"], t["start"], t["end"]
        waits.append(start - submit)
        starts.append(start)
        ends.append(end)
        submits.append(submit)
        nodes = hostlist.expand_hostlist(r["nodes"])
        if len(nodes) > 1:
            leaves = {leaf_of[n] for n in nodes}
            multi_in_leaf.append(len(leaves) == 1)
            multi_leaves.append(len(leaves))
            gpus = [(n, g) for n in nodes for g in range(spec.gpus_per_node)]
            allreduce.append(ring_allreduce_time_s(fabric, gpus, 1e9) * 1e3)
    waits.sort()
    return by_size(rows, leaf_of) | {
        "jobs": len(rows),
        "multi_node_jobs": len(multi_in_leaf),
        "multi_in_one_leaf_pct": 100 * sum(multi_in_leaf) / max(1, len(multi_in_leaf)),
        "leaves_per_multi_job": statistics.fmean(multi_leaves) if multi_leaves else 0.0,
        "wait_mean_s": statistics.fmean(waits),
        "wait_p95_s": waits[int(0.95 * (len(waits) - 1))],
        "makespan_s": max(ends) - min(submits),
        "allreduce_1gb_mean_ms": statistics.fmean(allreduce) if allreduce else 0.0,
    }


def by_size(rows: list[dict[str, Any]], leaf_of: dict[str, str]) -> dict[str, float]:
    """Per gang size (nodes): the share inside one leaf and the mean wait, so whole-leaf gangs
    (issue 21) are not averaged away among the small jobs."""
    groups: dict[int, list[tuple[bool, float]]] = {}
    for r in rows:
        t = r["time"]
        nodes = hostlist.expand_hostlist(r["nodes"])
        one = len({leaf_of[n] for n in nodes}) == 1
        groups.setdefault(len(nodes), []).append((one, t["start"] - t["submission"]))
    out: dict[str, float] = {}
    for size, got in sorted(groups.items()):
        out[f"n{size}_jobs"] = len(got)
        out[f"n{size}_in_one_leaf"] = sum(one for one, _ in got)
        out[f"n{size}_wait_mean_s"] = statistics.fmean(w for _, w in got)
    return out


def write_trace(jobs: list[StreamJob], path: Path) -> None:
    """The stream as a ``railgang sim`` CSV trace (the same jobs, shapes and durations), so the
    simulator replays what the real slurmctld ran."""
    with path.open("w") as f:
        f.write("job_id,submit_time,gpus,duration_s,tp,pp,dp\n")
        for j in jobs:
            gpus = j.nodes * j.gpus_per_node
            tp = 8 if j.gpus_per_node == 8 else 1
            f.write(f"s{j.index:03d},{j.arrival_s:.3f},{gpus},{j.duration_s:.1f},{tp},1,{gpus // tp}\n")


def start_daemon(spec: ClusterSpec, cycle_s: float, leaf_wait_s: float | None,
                 leaf_holds: int | None, whole_leaf_first: bool = False) -> subprocess.Popen[bytes]:
    """`railgang daemon run` on this cluster: its own SQLite database, the heartbeat file the
    cluster's job_submit.lua reads, no metrics port. Returns once the first heartbeat is written."""
    env = slurm_env(spec) | {
        "RAILGANG_SLURM__CONF": str(spec.slurm_conf),
        "RAILGANG_DAEMON__HEARTBEAT_FILE": str(spec.heartbeat_file),
        "RAILGANG_DB__URL": f"sqlite:///{spec.dir / 'railgang.sqlite'}",
        "RAILGANG_DAEMON__CYCLE_INTERVAL_S": str(cycle_s),
        "RAILGANG_DAEMON__METRICS_PORT": "0",
    }
    if leaf_wait_s is not None:  # else the daemon's default (DaemonSettings.leaf_wait_s)
        env["RAILGANG_DAEMON__LEAF_WAIT_S"] = str(leaf_wait_s)
    if leaf_holds is not None:
        env["RAILGANG_DAEMON__LEAF_HOLDS"] = str(leaf_holds)
    if whole_leaf_first:
        env["RAILGANG_DAEMON__WHOLE_LEAF_FIRST"] = "true"
    railgang = str(Path(sys.executable).with_name("railgang"))
    subprocess.run([railgang, "db", "upgrade"], env=env, check=True, capture_output=True)
    spec.heartbeat_file.unlink(missing_ok=True)
    log = open(spec.dir / "daemon.log", "wb")  # noqa: SIM115 (lives as long as the daemon)
    proc = subprocess.Popen([railgang, "daemon", "run"], env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while not spec.heartbeat_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"daemon did not start; see {spec.dir / 'daemon.log'}")
        time.sleep(0.2)
    return proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["plain", "switches", "railgang", "states"], required=True)
    ap.add_argument("--states", type=int, default=12, help="occupancy states (states mode)")
    ap.add_argument("--occupancy", type=float, default=0.5, help="busy share of GPUs (states mode)")
    ap.add_argument("--record", type=Path, default=None, help="states mode: write each state as JSON")
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--load", type=float, default=1.05, help="offered load (1.0 = all GPUs)")
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/railgang-bench-stream"))
    ap.add_argument("--port-base", type=int, default=29817)
    ap.add_argument("--cycle-s", type=float, default=2.0, help="daemon cycle (railgang mode)")
    ap.add_argument("--leaf-wait-s", type=float, default=None,
                    help="daemon.leaf_wait_s (railgang mode; default: the daemon's default)")
    ap.add_argument("--leaf-holds", type=int, default=None, help="daemon.leaf_holds (railgang mode)")
    ap.add_argument("--whole-leaf-first", action="store_true", help="daemon.whole_leaf_first (railgang mode)")
    ap.add_argument("--write-trace", type=Path, default=None,
                    help="write the stream as a `railgang sim` CSV trace and exit (no cluster)")
    args = ap.parse_args()
    if args.write_trace is not None:
        write_trace(make_stream(args.jobs, args.seed, 64 * 8, args.load, args.time_scale),
                    args.write_trace)
        return 0
    if not 0.0 <= args.occupancy < 1.0:
        ap.error(f"--occupancy {args.occupancy}: give the busy share of GPUs, 0 <= F < 1")
    if args.states < 1:
        ap.error(f"--states {args.states}: give at least 1")
    spec = ClusterSpec(dir=args.dir, nodes=64, gpus_per_node=8, nodes_per_leaf=8,
                       slurmctld_port=args.port_base, slurmdbd_port=args.port_base + 2,
                       mariadb_port=args.port_base - 511, slurmd_base_port=args.port_base + 83)
    cluster = DevCluster(spec)
    cluster.down()
    cluster.up()
    if args.mode == "states":
        try:
            print(run_states(cluster, args.states, args.occupancy, args.seed, args.record))
        finally:
            cluster.down()
        return 0
    daemon = (start_daemon(spec, args.cycle_s, args.leaf_wait_s, args.leaf_holds, args.whole_leaf_first)
              if args.mode == "railgang" else None)
    try:
        jobs = make_stream(args.jobs, args.seed, spec.nodes * spec.gpus_per_node, args.load,
                           args.time_scale)
        t0 = time.monotonic()
        ids = run_stream(cluster, jobs, args.mode)
        wall = time.monotonic() - t0
        result = measure(accounting(cluster, ids), spec)
    finally:
        if daemon is not None:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
        cluster.down()
    result |= {"mode": args.mode, "wall_s": wall, "load_avg": os.getloadavg()[0], "seed": args.seed}
    if args.mode == "railgang":
        result |= {"leaf_wait_s": args.leaf_wait_s, "leaf_holds": args.leaf_holds,
                   "whole_leaf_first": args.whole_leaf_first}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
