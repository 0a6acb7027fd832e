"""The real slurmctld, the transcribed cons_tres/topology-tree baseline and railgang, side by side
on the same occupancy states of the local cluster (issue 11, item 4).

For each state: filler jobs pinned to nodes (``-w node --gres=gpu:k``) load the cluster to the
drawn occupancy, two nodes are drained as quarantined (lame HCA), the actual free GPU indices
are read back from ``squeue --json``, then one gang is submitted the way a user would
(``--nodes=N --gres=gpu:8`` for whole-node gangs, ``--gpus=G`` otherwise). Where slurmctld starts
it is compared with ``slurm_tree_place`` and ``place`` on the same free map; each placement's
step communication comes from the physical model. Used by ``slurm_placement_stream.py --mode
states``.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from benchmarks.baselines.slurm_tree import ranks_in_order, slurm_tree_place, submission
from railgang.daemon.slurm.cli.records import squeue_job
from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.topology.comm_model import allreduce_time_s, step_comm_time_s
from railgang.topology.fabric import Fabric, fabric_from_shape
from railgang.topology.health import LinkHealth
from railgang.topology.occupancy import random_occupancy
from railgang.topology.placement import GangRequest, Placement, place

__all__ = ["GANGS", "run_states"]

GANGS: tuple[tuple[str, GangRequest], ...] = (
    ("16 GPUs tp8 dp2 (--nodes=2 --gres=gpu:8)", GangRequest(16, tp=8)),
    ("32 GPUs tp8 pp2 dp2 (--nodes=4 --gres=gpu:8)", GangRequest(32, tp=8, pp=2)),
    ("12 GPUs dp (--gpus=12)", GangRequest(12, job_class="dp")),
    ("24 GPUs tp4 pp2 dp3 (--gpus=24)", GangRequest(24, tp=4, pp=2)),
    ("64 GPUs tp8 pp2 dp4 (--nodes=8 --gres=gpu:8)", GangRequest(64, tp=8, pp=2)),
    ("20 GPUs dp (--gpus=20)", GangRequest(20, job_class="dp")),
)


def _sh(cluster: DevCluster, *argv: str) -> str:
    res = subprocess.run(list(argv), capture_output=True, text=True, env=slurm_env(cluster.spec),
                         timeout=60, check=False)
    if res.returncode:
        raise SystemExit(f"{' '.join(argv)}: exit {res.returncode}: {res.stderr.strip()}")
    return res.stdout


def _jobs(cluster: DevCluster) -> list[dict[str, object]]:
    doc = json.loads(_sh(cluster, "squeue", "--json"))
    return list(doc.get("jobs", []))


def _wait_running(cluster: DevCluster, ids: set[str], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        running = {str(j["job_id"]) for j in _jobs(cluster) if j.get("job_state") == "RUNNING"}
        if ids <= running:
            return True
        time.sleep(0.5)
    return False


def _sbatch(cluster: DevCluster, *args: str) -> str:
    out = _sh(cluster, "sbatch", "--parsable", "--account=team-a", "--output=/dev/null",
              "--time=60", *args, "--wrap=sleep 3000")
    return out.strip().split(";")[0]


def _load(cluster: DevCluster, fabric: Fabric, target: Mapping[str, frozenset[int]]) -> set[str]:
    ids = set()
    for node in fabric.nodes:
        busy = fabric.facts(node).gpus - len(target.get(node, ()))
        if busy > 0:
            ids.add(_sbatch(cluster, f"--nodelist={node}", "--nodes=1", f"--gres=gpu:{busy}",
                            f"--rg-parallel=tp1,dp{busy}"))
    if not _wait_running(cluster, ids, 120):
        raise SystemExit("filler jobs did not all start; see the cluster's slurmctld.log")
    return ids


def _free_from_slurm(cluster: DevCluster, fabric: Fabric) -> dict[str, frozenset[int]]:
    busy: dict[str, set[int]] = {}
    for raw in _jobs(cluster):
        if raw.get("job_state") != "RUNNING":
            continue
        for node, idxs in squeue_job(raw).allocation:
            busy.setdefault(node, set()).update(idxs)
    return {n: frozenset(range(fabric.facts(n).gpus)) - busy.get(n, set()) for n in fabric.nodes}


def _submit_gang(cluster: DevCluster, fabric: Fabric, req: GangRequest) -> Placement | None:
    nodes, per = submission(fabric, req)
    dp = req.gpus // (req.tp * req.pp)
    shape = f"--rg-parallel=tp{req.tp},pp{req.pp},dp{dp}"
    args = ([f"--nodes={nodes}", f"--gres=gpu:{per}"] if nodes else [f"--gpus={req.gpus}"])
    job = _sbatch(cluster, *args, shape)
    if not _wait_running(cluster, {job}, 30):
        _sh(cluster, "scancel", job)
        return None
    raw = next(j for j in _jobs(cluster) if str(j["job_id"]) == job)
    gpus = [(n, g) for n, idxs in squeue_job(raw).allocation for g in idxs]
    return ranks_in_order(gpus, req.tp, req.pp)


def _reset(cluster: DevCluster, drained: list[str]) -> None:
    _sh(cluster, "scancel", "--user=root")
    for _ in range(120):
        if not _jobs(cluster) or all(j.get("job_state") not in ("RUNNING", "PENDING", "COMPLETING")
                                     for j in _jobs(cluster)):
            break
        time.sleep(0.5)
    if drained:
        _sh(cluster, "scontrol", "update", f"nodename={','.join(drained)}", "state=resume")


def _row(fabric: Fabric, p: Placement | None, health: LinkHealth) -> tuple[float, float, int] | None:
    if p is None:
        return None
    step = step_comm_time_s(fabric, p, 8e9, 64e6, health=health)["total"] * 1e3
    return step, allreduce_time_s(fabric, p, 1e9, health=health) * 1e3, len({fabric.leaf_of(n) for n in p.gpus})


def run_states(cluster: DevCluster, states: int, occupancy: float, seed: int,
               record: Path | None = None) -> str:
    """Markdown table of the three placements per state, and how often baseline == slurmctld.

    ``record``: write every state (free GPUs, drained nodes, request, slurmctld's GPUs) as JSON,
    so a disagreement can be replayed without a cluster."""
    spec = cluster.spec
    fabric = fabric_from_shape(spec.nodes, spec.gpus_per_node, spec.nodes_per_leaf)
    rng = random.Random(seed)
    lines = ["| state | gang | placement | nodes | leaves | step comm (ms) | 1 GB all-reduce (ms) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    same = compared = 0
    ratios: dict[str, list[float]] = {"slurmctld": [], "baseline": []}
    leaves: dict[str, list[int]] = {"slurmctld": [], "baseline": [], "railgang": []}
    recorded: list[dict[str, object]] = []
    for s in range(states):
        label, req = GANGS[s % len(GANGS)]
        target = random_occupancy(fabric, occupancy, rng.randrange(10**9))
        drained = rng.sample(list(fabric.nodes), 2)
        health = LinkHealth(hca={(n, 0): 0.5 for n in drained}, quarantined={n: "lame HCA" for n in drained})
        _load(cluster, fabric, target)
        _sh(cluster, "scontrol", "update", f"nodename={','.join(drained)}", "state=drain", "reason=lame-hca")
        free = _free_from_slurm(cluster, fabric)
        real = _submit_gang(cluster, fabric, req)
        base = slurm_tree_place(fabric, free, req, drained=drained)
        rg = place(fabric, free, req, health=health, seed=s)
        rgp = rg if isinstance(rg, Placement) else None
        recorded.append({"free": {n: sorted(v) for n, v in free.items()}, "drained": drained,
                         "request": {"gpus": req.gpus, "tp": req.tp, "pp": req.pp},
                         "slurmctld": {n: list(g) for n, g in real.gpus.items()} if real else None})
        if real is not None and base is not None:
            compared += 1
            same += dict(real.gpus) == dict(base.gpus)
        rows = {"slurmctld": _row(fabric, real, health), "baseline": _row(fabric, base, health),
                "railgang": _row(fabric, rgp, health)}
        for name, p in (("slurmctld", real), ("baseline", base), ("railgang", rgp)):
            r = rows[name]
            nodes = ",".join(f"{n}:{len(g)}" for n, g in p.gpus.items()) if p is not None else "pending"
            cells = f"{r[2]} | {r[0]:.2f} | {r[1]:.2f}" if r is not None else "- | - | -"
            lines.append(f"| {s} | {label} | {name} | {nodes} | {cells} |")
        for name, row in rows.items():
            if row is not None:
                leaves[name].append(row[2])
        if rows["railgang"] is not None:
            for name in ratios:
                if (r := rows[name]) is not None:
                    ratios[name].append(r[0] / rows["railgang"][0])
        _reset(cluster, drained)
    if record is not None:
        record.write_text(json.dumps(recorded, indent=1))
    lines.append("")
    lines.append(f"transcribed baseline == slurmctld (same nodes and GPU indices): {same}/{compared} states")
    for name, counts in leaves.items():
        if counts:
            lines.append(f"{name}: {sum(counts)} leaves over {len(counts)} placed gangs "
                         f"(mean {statistics.fmean(counts):.2f})")
    for name, vals in ratios.items():
        if vals:
            lines.append(f"{name} step comm / railgang's: median {statistics.median(vals):.2f}, "
                         f"max {max(vals):.2f} ({len(vals)} states)")
    return "\n".join(lines)
