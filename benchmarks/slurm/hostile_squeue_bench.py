"""A daemon cycle when some of squeue's records are hostile (issue 18 row 3).

    .venv/bin/python -m benchmarks.slurm.hostile_squeue_bench [--pending 1000] [--bad 10] [--cycles 9]

A recorded 22.05 ``squeue --json``/``sinfo --json`` (tests/daemon/slurm/cli/data) is grown to a
1,250-node x 8-GPU cluster (leaves of 8) and ``--pending`` leased railgang jobs of 4 or 8 GPUs,
all of which fit. Of those, ``--bad`` are made hostile in the raw bytes: invalid UTF-8 in the job
name or Comment (22.05 copies both unchecked; the job itself is valid), ``Infinity`` in
``node_count`` or ``priority``, a lone ``\\ud800`` escape in the name, and entries that are not
objects (``1``, ``[1]``). Each cycle runs what the daemon runs on that output: the runner's
decoding (``runner.decode``), ``parse_squeue``, ``parse_sinfo``, ``build_observation`` and the
core's ``decide`` under ``default``. It is timed against the same cluster with clean records.
Reported: per-cycle medians and ranges, the jobs placed (Start actions), the records skipped, and
the load average (/proc/loadavg). slurmctld is not involved: a real 22.05 emits such bytes only
for a user who writes them, so the hostile output is made here, from a recorded one.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from typing import Any

from benchmarks.common import REPO
from railgang.daemon.core.cycle import decide
from railgang.daemon.core.model.actions import Start
from railgang.daemon.core.policies import registry
from railgang.daemon.slurm.cli.records import parse_sinfo, parse_squeue
from railgang.daemon.slurm.cli.runner import decode
from railgang.daemon.slurm.cli.snapshot import build_observation
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf

DATA = REPO / "tests" / "daemon" / "slurm" / "cli" / "data"
NOW = 1796057400.0


def cluster(nodes: int) -> tuple[bytes, Any]:
    raw = json.loads((DATA / "sinfo_mixed.json").read_text())
    template = next(n for n in raw["nodes"] if n["name"] == "n03")  # idle, gpu:8
    names = [f"n{i:04d}" for i in range(1, nodes + 1)]
    raw["nodes"] = [{**template, "name": n, "hostnames": n, "address": n} for n in names]
    leaves = [names[i:i + 8] for i in range(0, nodes, 8)]
    conf = "".join(f"SwitchName=leaf{k} Nodes={','.join(leaf)}\n" for k, leaf in enumerate(leaves))
    conf += f"SwitchName=spine Switches=leaf[0-{len(leaves) - 1}]\n"
    return json.dumps(raw).encode(), fabric_from_conf(parse_topology(conf, "bench"))


def queue(pending: int, bad: int, seed: int) -> bytes:
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    template = next(j for j in raw["jobs"] if j["job_id"] == 11)  # leased, pending
    rng = random.Random(seed)
    jobs: list[Any] = []
    for i in range(pending):
        gpus = rng.choice((4, 8))
        jobs.append({**template, "job_id": 1000 + i, "name": f"train-{i}", "comment": "",
                     "admin_comment": f"railgang:tp={gpus},pp=1,dp=1;class=3",
                     "node_count": 1, "tres_per_node": f"gres:gpu:{gpus}", "tres_per_job": "",
                     "submit_time": NOW - 3600 + i, "eligible_time": NOW + 300,
                     "required_nodes": "", "user_name": f"user{i % 50}"})
    hostile = sorted(rng.sample(range(pending), bad))
    kinds = ["utf8-name", "utf8-comment", "infinity-nodes", "infinity-priority", "not-an-object",
             "list", "surrogate-name", "utf8-name", "utf8-comment", "infinity-nodes"]
    for n, i in enumerate(hostile):
        kind = kinds[n % len(kinds)]
        if kind == "infinity-nodes":
            jobs[i]["node_count"] = math.inf
        elif kind == "infinity-priority":
            jobs[i]["priority"] = math.inf
        elif kind == "not-an-object":
            jobs[i] = 1
        elif kind == "list":
            jobs[i] = [1]
        elif kind == "surrogate-name":
            jobs[i]["name"] = "SURROGATE"
        else:
            jobs[i]["name" if kind == "utf8-name" else "comment"] = "BADBYTES"
    text = json.dumps({**raw, "jobs": jobs}).encode()
    return (text.replace(b'"BADBYTES"', b'"tr\\u00e9s \xff\xfe\xc3("')
            .replace(b'"SURROGATE"', b'"x\\ud800y"'))


def cycle(squeue: bytes, sinfo: bytes, fabric: Any) -> tuple[float, float, int, int, int]:
    """(ms to decode, parse and build the snapshot, ms in decide, queued, started, skipped)."""
    t0 = time.perf_counter()
    recs, notes = parse_squeue(decode(squeue))
    nodes, node_notes = parse_sinfo(decode(sinfo))
    obs = build_observation(NOW, recs, nodes, fabric, (), [*notes, *node_notes])
    t1 = time.perf_counter()
    decision = decide(obs.snapshot, registry.get("default"), NOW, random.Random(0))
    t2 = time.perf_counter()
    return ((t1 - t0) * 1e3, (t2 - t1) * 1e3, len(obs.snapshot.pending),
            len(decision.of(Start)), len(obs.skipped))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1250)
    ap.add_argument("--pending", type=int, default=1000)
    ap.add_argument("--bad", type=int, default=10)
    ap.add_argument("--cycles", type=int, default=9)
    args = ap.parse_args()
    sinfo, fabric = cluster(args.nodes)
    inputs = {"clean": queue(args.pending, 0, 1), "hostile": queue(args.pending, args.bad, 1)}
    try:
        inputs["hostile"].decode("utf-8")
        strict = "decodes"
    except UnicodeDecodeError as exc:
        strict = f"UnicodeDecodeError ({exc.reason} at byte {exc.start})"
    print(f"hostile output, strictly decoded as the runner did before 6489313: {strict}")
    parse: dict[str, list[float]] = {k: [] for k in inputs}
    core: dict[str, list[float]] = {k: [] for k in inputs}
    seen: dict[str, tuple[int, int, int]] = {}
    for _ in range(args.cycles):  # interleaved, so load changes hit both alike
        for name, squeue in inputs.items():
            p_ms, c_ms, queued, started, skipped = cycle(squeue, sinfo, fabric)
            parse[name].append(p_ms)
            core[name].append(c_ms)
            seen[name] = (queued, started, skipped)
    with open("/proc/loadavg") as f:
        load = " / ".join(f.read().split()[:3])
    for name in inputs:
        p, c = sorted(parse[name]), sorted(core[name])
        total = sorted(a + b for a, b in zip(parse[name], core[name], strict=True))
        queued, started, skipped = seen[name]
        print(f"{name:8} decode+parse+snapshot median {statistics.median(p):6.1f} ms "
              f"({p[0]:.1f}-{p[-1]:.1f}); decide {statistics.median(c):7.1f} ms "
              f"({c[0]:.1f}-{c[-1]:.1f}); total {statistics.median(total):7.1f} ms "
              f"({total[0]:.1f}-{total[-1]:.1f}); queued {queued}, started {started}, "
              f"skip notes {skipped}")
    for label, series in (("decode+parse+snapshot", parse), ("decide", core)):
        ratio = statistics.median(series["hostile"]) / statistics.median(series["clean"])
        print(f"hostile/clean {label} median ratio {ratio:.2f}")
    print(f"load average {load}")


if __name__ == "__main__":
    main()
