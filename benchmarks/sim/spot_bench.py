"""Cost vs JCT with a spot pool at several interruption rates (issue 13 part 3).

Replays a Philly VC (or the first ``--limit`` jobs of the merged trace) with ``railgang sim
--gpus TYPE=N,TYPE:spot=N`` — an on-demand pool beside a spot pool of the same GPU type — at each
``--rates`` (spot reclaims per node per day), once with the core's cost-aware routing (spot only
while a job's predicted interruptions stay at or under ``--max-per-day`` and its C_eff is below
on-demand), once ``--spot-cost-blind`` (spot whenever it is free), and on an all-spot cluster
of the same size, plus an all-on-demand cluster of that size as the reference (``--runs`` picks
some of ``ondemand,aware,blind,allspot``). Prints a Markdown table: mean JCT, makespan, total
cost and the share paid to spot, spot interruptions, GPU-hours lost.

    .venv/bin/python -m benchmarks.sim.spot_bench --vc 6c71a0 --gpus v100=64,v100:spot=64 \\
        --rates 0,1,4,12 [--notice-s 120] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, philly_dir


def sim(trace: Path, gpus: str, args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    cmd = [str(REPO / ".venv/bin/railgang"), "sim", "--trace", str(trace), "--gpus", gpus,
           "--gpus-per-node", str(args.gpus_per_node), "--leaf", str(args.leaf),
           "--policy", args.policy, "--seed", str(args.seed), "--spot-notice-s",
           str(args.notice_s), "--spot-max-per-day", str(args.max_per_day), "--json", "--quiet",
           *extra]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    res: dict[str, Any] = json.loads(out.stdout)["results"][args.policy]
    return res


def row(label: str, res: dict[str, Any]) -> dict[str, Any]:
    spot = res["by_tier"].get("spot", {}).get("cost_usd", 0.0)
    return {"run": label, "mean_jct_h": res["mean_jct_s"] / 3600,
            "makespan_h": res["makespan_s"] / 3600, "cost_usd": res["cost_usd"],
            "spot_share": spot / res["cost_usd"] if res["cost_usd"] else 0.0,
            "spot_gpu_h": res["by_tier"].get("spot", {}).get("gpu_h", 0.0),
            "interruptions": res["interruptions"],
            "gpu_h_lost": res["gpu_hours_lost_to_preemption"], "finished": res["finished"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vc", default="6c71a0", help="Philly VC (trace file stem); '' = all VCs")
    ap.add_argument("--gpus", default="v100=64,v100:spot=64")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--leaf", type=int, default=4)
    ap.add_argument("--rates", default="0,1,4,12", help="spot reclaims per node per day")
    ap.add_argument("--notice-s", type=float, default=120.0)
    ap.add_argument("--max-per-day", type=float, default=4.0)
    ap.add_argument("--policy", default="default")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--runs", default="ondemand,aware,blind,allspot")
    args = ap.parse_args()
    root = philly_dir()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="spot-bench-") as tmp:
        trace = root
        if args.vc:
            trace = Path(tmp)
            (trace / "seed=0").mkdir()
            shutil.copy(root / "seed=0" / f"{args.vc}.trace", trace / "seed=0")
            shutil.copy(root / "simulation_throughputs.json", trace)
        total = sum(int(p.split("=")[1]) for p in args.gpus.split(","))
        gpu_type = args.gpus.split(",")[0].split("=")[0].split(":")[0]
        runs = set(args.runs.split(","))
        if "ondemand" in runs:
            rows.append(row(f"all on-demand ({gpu_type}={total})",
                            sim(trace, f"{gpu_type}={total}", args, [])))
            print(json.dumps(rows[-1]), file=sys.stderr)
        for rate in (float(r) for r in args.rates.split(",")):
            for kind, gpus, extra, label in (
                    ("aware", args.gpus, [], f"{args.gpus}, cost-aware"),
                    ("blind", args.gpus, ["--spot-cost-blind"], f"{args.gpus}, spot whenever free"),
                    ("allspot", f"{gpu_type}:spot={total}", [], f"all spot ({gpu_type}:spot={total})")):
                if kind in runs:
                    rows.append(row(f"{rate:g}/node-day: {label}",
                                    sim(trace, gpus, args, ["--spot-rate", str(rate), *extra])))
                    print(json.dumps(rows[-1]), file=sys.stderr)
    print("| run | finished | mean JCT (h) | makespan (h) | cost ($) | paid to spot | "
          "spot GPU-h | interruptions | GPU-h lost |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['run']} | {r['finished']} | {r['mean_jct_h']:.2f} | {r['makespan_h']:.1f} | "
              f"{r['cost_usd']:,.0f} | {r['spot_share']:.0%} | {r['spot_gpu_h']:,.0f} | "
              f"{r['interruptions']:,} | {r['gpu_h_lost']:,.0f} |")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
