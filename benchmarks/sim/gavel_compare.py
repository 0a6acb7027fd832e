"""railgang vs Gavel's simulator on the same Philly trace and the same mixed cluster.

Gavel (Narayanan et al., OSDI'20, github.com/stanford-futuredata/gavel) is *not* vendored: point
``GAVEL_DIR`` at the ``scheduler/`` directory of a Gavel checkout (commit c4fa400, the one the
traces came from) and run this script with a Python that has Gavel's simulator dependencies
(numpy, scipy, cvxpy + ecos, scikit-learn, matrix_completion, psutil, grpcio + compiled stubs);
docs/simulator.md "Comparing with Gavel" says exactly how to set that up. The railgang runs go
through ``railgang sim --json`` of the repository's own virtualenv.

What is compared, on one trace file (a Philly VC) and one cluster ``--gpus v100=N,p100=N,k80=N``:

- Gavel ``max_min_fairness_perf`` (heterogeneity-aware LAS), ``max_min_fairness`` (agnostic
  LAS), ``fifo`` and ``fifo_perf``; 6-minute rounds, preemption and migration free of charge.
- railgang ``default`` heterogeneity-aware and ``--type-blind``, ``fifo`` both ways; checkpoint
  loss and restore are charged on every preemption.

Only jobs whose (model, size) Gavel measured on every GPU type of the cluster are kept (Gavel
raises a KeyError on the others); both simulators get exactly the same jobs, converted to Gavel's
10-column trace format in a temporary file (``--gavel-trace-out`` keeps a copy, e.g. to run
Gavel's own driver on it).

    GAVEL_DIR=/tmp/gavel/scheduler /tmp/gavel-venv/bin/python -m benchmarks.sim.gavel_compare \\
        --vc ed69ec --gpus v100=12,p100=12,k80=12 --gpus-per-node 4 [--limit N] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, import_first, philly_dir

TYPES = ("v100", "p100", "k80")
GAVEL_POLICIES = ("max_min_fairness_perf", "max_min_fairness", "fifo_perf", "fifo")
RAILGANG_RUNS = (("default", False), ("default", True), ("fifo", False), ("fifo", True))


def measured(throughputs: dict[str, Any], job_type: str, gpus: int, types: tuple[str, ...]) -> bool:
    key = str((job_type, gpus))
    return all(isinstance(throughputs[t].get(key), dict) and throughputs[t][key].get("null")
               for t in types)


def select(vc: str, limit: int | None, work: Path, types: tuple[str, ...] = TYPES,
           ) -> tuple[Path, Path, int]:
    """Write the kept jobs as a railgang trace (7 columns) and as a Gavel trace (10 columns)."""
    root = philly_dir()
    throughputs = json.loads((root / "simulation_throughputs.json").read_text())
    ours, theirs = work / "seed=0" / f"{vc}.trace", work / f"{vc}.gavel.trace"
    ours.parent.mkdir(parents=True, exist_ok=True)
    (work / "simulation_throughputs.json").write_text(json.dumps(throughputs))
    kept = 0
    with ours.open("w") as a, theirs.open("w") as b:
        for line in (root / "seed=0" / f"{vc}.trace").read_text().splitlines():
            cells = line.split("\t")
            if len(cells) != 7 or not measured(throughputs, cells[0], int(cells[6]), types):
                continue
            job_type, command, steps_arg, needs_data, steps, arrival, gpus = cells
            a.write(line + "\n")
            # Gavel's utils.parse_trace: type, command, workdir, steps arg, needs data, steps,
            # scale factor, priority weight, SLO, arrival
            b.write("\t".join([job_type, command, "", steps_arg, needs_data, steps, gpus, "1",
                               "-1", arrival]) + "\n")
            kept += 1
            if limit is not None and kept >= limit:
                break
    return ours, theirs, kept


def run_gavel(gavel_dir: Path, trace: Path, policy: str, spec: dict[str, int], per_node: int,
              seed: int, round_s: int) -> dict[str, Any]:
    """One Gavel simulation in this process (Gavel's own Scheduler.simulate, as its driver
    scripts/drivers/simulate_scheduler_with_trace.py calls it)."""
    import_first(gavel_dir)
    import scheduler  # Gavel's, from GAVEL_DIR
    import utils

    logging.disable(logging.WARNING)  # Gavel logs every micro-task: gigabytes for one VC
    jobs, arrivals = utils.parse_trace(str(trace))
    sched = scheduler.Scheduler(utils.get_policy(policy, solver="ECOS", seed=seed),
                                throughputs_file=str(gavel_dir / "simulation_throughputs.json"),
                                simulate=True, seed=seed, time_per_iteration=round_s)
    started = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # Gavel prints its totals; our table is stdout
        sched.simulate(spec, arrivals, jobs,
                       num_gpus_per_server={t: per_node for t in TYPES})
    wall = time.perf_counter() - started
    jcts = [v for v in sched._job_completion_times.values() if v is not None]
    end = sched.get_current_timestamp()
    busy: dict[str, float] = dict.fromkeys(TYPES, 0.0)
    for worker, used in sched._cumulative_worker_time_so_far.items():
        busy[sched._worker_id_to_worker_type_mapping[worker]] += used
    makespan = end - min(arrivals)
    sched.shutdown()
    return {"simulator": "gavel", "policy": policy, "jobs_finished": len(jcts),
            "mean_jct_h": sum(jcts) / len(jcts) / 3600 if jcts else None,
            "makespan_h": makespan / 3600,
            "util_by_type": {t: busy[t] / (spec[t] * makespan) if spec[t] else None
                             for t in TYPES},
            "wall_s": round(wall, 1)}


def run_railgang(trace_dir: Path, policy: str, type_blind: bool, gpus: str, per_node: int,
                 leaf: int, seed: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """``extra``: more ``railgang sim`` options (gavel_fidelity.py passes ``--cycle-s``)."""
    cmd = [str(REPO / ".venv/bin/railgang"), "sim", "--trace", str(trace_dir), "--gpus", gpus,
           "--gpus-per-node", str(per_node), "--leaf", str(leaf), "--policy", policy,
           "--seed", str(seed), "--json", "--quiet", *extra] + (
               ["--type-blind"] if type_blind else [])
    started = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - started
    res = json.loads(out.stdout)["results"][policy]
    m = res
    return {"simulator": "railgang", "policy": policy + (" type-blind" if type_blind else ""),
            "jobs_finished": m["finished"], "mean_jct_h": m["mean_jct_s"] / 3600,
            "makespan_h": m["makespan_s"] / 3600,
            "util_by_type": {t: v["allocated"] for t, v in res.get("by_type", {}).items()},
            "preemptions": m.get("preemptions"), "gpu_h_lost": m.get("gpu_hours_lost_to_preemption"),
            "util_allocated": m.get("util_allocated"),
            "idle_while_waiting_by_reason": m.get("idle_while_waiting_by_reason"),
            "wall_s": round(wall, 1)}


def parse_gpus(text: str) -> dict[str, int]:
    spec = dict.fromkeys(TYPES, 0)
    for part in text.split(","):
        name, _, count = part.partition("=")
        if name not in spec or not count.isdigit():
            raise SystemExit(f"--gpus: expected v100=N,p100=N,k80=N, got {part!r}")
        spec[name] = int(count)
    return spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vc", default="ed69ec", help="Philly VC (trace file stem)")
    ap.add_argument("--gpus", default="v100=12,p100=12,k80=12")
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--leaf", type=int, default=4, help="railgang: nodes per leaf switch")
    ap.add_argument("--limit", type=int, default=None, help="first N kept jobs only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--round-s", type=int, default=360, help="Gavel round length")
    ap.add_argument("--only", choices=("gavel", "railgang"), default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--gavel-trace-out", type=Path, default=None,
                    help="also save the converted Gavel trace here")
    args = ap.parse_args()
    spec = parse_gpus(args.gpus)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gavel-compare-") as tmp:
        work = Path(tmp)
        types = tuple(t for t in TYPES if spec[t] > 0)
        _, theirs, kept = select(args.vc, args.limit, work, types)
        if args.gavel_trace_out is not None:
            shutil.copy(theirs, args.gavel_trace_out)
        print(f"{kept} jobs of VC {args.vc} on {args.gpus}", file=sys.stderr)
        if args.only != "gavel":
            for policy, blind in RAILGANG_RUNS:
                rows.append(run_railgang(work, policy, blind, args.gpus, args.gpus_per_node,
                                         args.leaf, args.seed))
                print(json.dumps(rows[-1]), file=sys.stderr)
        if args.only != "railgang":
            gavel = os.environ.get("GAVEL_DIR")
            if not gavel:
                raise SystemExit("set GAVEL_DIR to the scheduler/ directory of a Gavel checkout "
                                 "(docs/simulator.md, 'Comparing with Gavel')")
            for policy in GAVEL_POLICIES:
                rows.append(run_gavel(Path(gavel), theirs, policy, spec, args.gpus_per_node,
                                      args.seed, args.round_s))
                print(json.dumps(rows[-1]), file=sys.stderr)
    print(f"| simulator | policy | finished | mean JCT (h) | makespan (h) | "
          f"util {' / '.join(TYPES)} |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for r in rows:
        util = " / ".join("-" if r["util_by_type"].get(t) is None else f"{r['util_by_type'][t]:.2f}"
                          for t in TYPES)
        print(f"| {r['simulator']} | {r['policy']} | {r['jobs_finished']} | {r['mean_jct_h']:.2f} "
              f"| {r['makespan_h']:.1f} | {util} |")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
