"""Fidelity of railgang's simulator against Gavel's on one Philly VC and one GPU type (issue 12 part 6).

Gavel's ``fifo`` on a single-type cluster (default: VC 6214e9, 1,985 of its 2,000 jobs, 64 V100)
against railgang's two FIFO disciplines, ``fifo`` (strict head-of-line) and ``fifo-greedy`` (skip
what does not fit), first with Gavel's modelling assumptions and then with each of railgang's own
assumptions switched back on, one at a time, so the table gives every remaining difference with
its measured effect on mean JCT:

- ``gavel-like``: one 64-GPU node (Gavel places a gang on any free workers of the type: no node
  or switch boundary), decisions in 360 s rounds (``--cycle-s 360`` = Gavel's
  ``time_per_iteration``), type-blind. railgang's FIFO never preempts; Gavel's may, for free,
  only where its allocation over-admits a job at a completion (docs/simulator.md).
- ``8-gpu-nodes``: the same on 8 nodes x 8 GPUs, railgang's gang placement (a gang of 8 or more
  takes whole nodes, a smaller one stays in one node).
- ``event-driven``: one node, but a decision at every arrival and completion (``--cycle-s 0``).
- ``decide-every-1920s``: one node, decisions 1,920 s apart: Gavel recomputes its allocation only
  on an arrival or completion *and* at least ``minimum_time_between_allocation_resets`` (1,920 s
  by default) after the previous one; its 360 s rounds only re-run the allocated jobs.

Jobs: the helpers of ``gavel_compare`` (same selection: only (model, size) pairs Gavel measured,
since Gavel raises a KeyError on the others; same 10-column Gavel trace; Gavel run in process).

    GAVEL_DIR=/tmp/gavel/scheduler /tmp/gavel-venv/bin/python -m benchmarks.sim.gavel_fidelity \\
        [--vc 6214e9] [--v100 64] [--jobs 4] [--only railgang] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.sim.gavel_compare import run_gavel, run_railgang, select  # benchmark sibling

# (label, GPUs per node or 0 = all in one node, --cycle-s)
SETUPS = (("gavel-like", 0, 360.0), ("8-gpu-nodes", 8, 360.0), ("event-driven", 0, 0.0),
          ("decide-every-1920s", 0, 1920.0))
POLICIES = ("fifo", "fifo-greedy")


def railgang_row(work: Path, policy: str, setup: tuple[str, int, float], gpus: int,
                 seed: int) -> dict[str, Any]:
    label, per_node, cycle_s = setup
    per_node = per_node or gpus
    row = run_railgang(work, policy, True, f"v100={gpus}", per_node, max(1, gpus // per_node),
                       seed, extra=("--cycle-s", str(cycle_s)))
    return {**row, "setup": label}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vc", default="6214e9", help="Philly VC (trace file stem)")
    ap.add_argument("--v100", type=int, default=64, help="V100 GPUs (single-type cluster)")
    ap.add_argument("--gavel-gpus-per-node", type=int, default=8,
                    help="Gavel's num_gpus_per_server (no effect on FIFO's schedule)")
    ap.add_argument("--round-s", type=int, default=360, help="Gavel round length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="first N kept jobs only")
    ap.add_argument("--jobs", type=int, default=1, help="railgang replays in parallel")
    ap.add_argument("--only", choices=("gavel", "railgang"), default=None)
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gavel-fidelity-") as tmp:
        work = Path(tmp)
        _, theirs, kept = select(args.vc, args.limit, work, ("v100",))
        print(f"{kept} jobs of VC {args.vc} on {args.v100} V100", file=sys.stderr)
        if args.only != "gavel":
            runs = [(p, s) for s in SETUPS for p in POLICIES]
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                rows += pool.map(lambda r: railgang_row(work, r[0], r[1], args.v100, args.seed),
                                 runs)
        if args.only != "railgang":
            gavel = os.environ.get("GAVEL_DIR")
            if not gavel:
                raise SystemExit("set GAVEL_DIR to the scheduler/ directory of a Gavel checkout "
                                 "(docs/simulator.md, 'Comparing with Gavel')")
            spec = {"v100": args.v100, "p100": 0, "k80": 0}
            rows.append({**run_gavel(Path(gavel), theirs, "fifo", spec, args.gavel_gpus_per_node,
                                     args.seed, args.round_s), "setup": "gavel"})
    ref = next((r["mean_jct_h"] for r in rows if r["simulator"] == "gavel"), None)
    print("| simulator | policy | setup | finished | mean JCT (h) | vs Gavel | makespan (h) |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for r in rows:
        delta = "-" if ref is None else f"{100 * (r['mean_jct_h'] / ref - 1):+.1f} %"
        print(f"| {r['simulator']} | {r['policy']} | {r['setup']} | {r['jobs_finished']} "
              f"| {r['mean_jct_h']:.1f} | {delta} | {r['makespan_h']:.1f} |")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
