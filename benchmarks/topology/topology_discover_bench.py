"""Discovery benchmark: how long ``railgang topology discover`` takes on a 10,000-GPU fabric.

    .venv/bin/python -m benchmarks.topology.topology_discover_bench [--repeats 5] [--nodes 1250]

The fabric: ``--nodes`` nodes x 8 GPUs x 8 rails (one HCA per GPU), rail-optimised, 32 nodes per
scalable unit (one leaf per rail per unit), 8 spines per rail; ibnetdiscover text written by
``railgang.topology.discover.generate`` in the plain and the ``-p`` form. Timed in process, phase
by phase (read+parse, classify, Slurm tree + topology.conf, check with topology/conf.py, facts
JSON), and end to end as the real command in a child process (Python start-up included), with the
child's peak RSS. Prints Markdown (pasted into BENCHMARKS.md) with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from railgang.topology.conf import parse_topology
from railgang.topology.discover import (
    Shape,
    classify,
    facts_json,
    generate_ibnetdiscover,
    parse_ibnetdiscover,
    render_conf,
    slurm_tree,
)
from railgang.topology.inputs import iter_lines

_CHILD = ("import resource, sys, time\n"
          "t = time.perf_counter()\n"
          "from railgang.daemon.cli.main import main\n"
          "sys.argv = ['railgang', 'topology', 'discover', sys.argv[1], '-o', sys.argv[2], '--facts-out', sys.argv[3]]\n"
          "try:\n    main()\n"
          "finally:\n"
          "    print('CHILD', time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
          " file=sys.stderr)\n")


def _phases(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    found = parse_ibnetdiscover(iter_lines(path, "capture", max_bytes=512 * 2**20), str(path))
    t1 = time.perf_counter()
    facts = classify(found)
    t2 = time.perf_counter()
    tree = slurm_tree(facts)
    conf = render_conf(facts, tree)
    t3 = time.perf_counter()
    parsed = parse_topology(conf, "<discovered>")
    t4 = time.perf_counter()
    json.dumps(facts_json(facts, tree))
    t5 = time.perf_counter()
    assert len(parsed.nodes) == len(facts.hosts) and not facts.problems
    out.update({"read+parse": t1 - t0, "classify": t2 - t1, "tree+conf": t3 - t2, "conf.py check": t4 - t3,
                "facts JSON": t5 - t4, "total": t5 - t0})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=1250)
    args = ap.parse_args()
    shape = Shape(nodes=args.nodes, rails=8, nodes_per_leaf=32, spines=8)
    print(f"### Discovery on {args.nodes * 8:,} GPUs ({args.nodes} nodes x 8 GPUs x 8 rails, rail-optimised)\n")
    print(f"`{' '.join([Path(sys.executable).name, *sys.argv])}`; Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| form | input | devices | phase times, median of runs (s) | in-process total (s) min / median "
          "| command end to end (s) | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for form in ("topology", "ports"):
            gen = generate_ibnetdiscover(shape, form)
            src = Path(tmp) / f"fabric.{form}"
            src.write_text(gen.text)
            runs = [_phases(src) for _ in range(args.repeats)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            totals = [r["total"] for r in runs]
            child = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(Path(tmp) / "t.conf"),
                                    str(Path(tmp) / "f.json")], capture_output=True, text=True, check=True)
            wall, rss = child.stderr.rsplit("CHILD", 1)[1].split()
            phases = ", ".join(f"{k} {v:.3f}" for k, v in med.items() if k != "total")
            devices = f"{gen.switches} switches, {args.nodes * 8:,} HCAs"
            print(f"| {form} | {len(gen.text) / 2**20:.1f} MiB, {gen.text.count(chr(10)):,} lines | {devices} | "
                  f"{phases} | {min(totals):.3f} / {statistics.median(totals):.3f} | {float(wall):.2f} | "
                  f"{int(rss) / 1024:.0f} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"this process's peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
