"""Slurm 24.11's own topology/block placement, recorded on the real slurmctld (issue 21 item 2).

A GB200-style cluster (RACKS NVL72 racks of 18 nodes × 4 GPUs, one block per rack,
``BlockSizes=18,36,72``) runs in the trixie container (railgang's devcluster with its
topology.conf and slurm.conf switched to topology/block). For each state: filler jobs pinned to
nodes load each rack to a drawn level (racks differ: that is where block choice matters), two
nodes are drained, then one gang is submitted as users of NVL72 racks do (``--nodes=N
--gres=gpu:4``, with ``--segment=S`` or ``--exclusive=topo`` for some) and where slurmctld starts
it is read back. Every state is written as JSON (tests/topology/data/slurm_block_states.json):
what the transcription (benchmarks/baselines/slurm_block.py) is checked against, and
what the benchmark replays.

    python -m benchmarks.slurm.block_states --states 42 --seed 0 --out tests/topology/data/slurm_block_states.json
    python -m benchmarks.slurm.block_states --profile sparse --states 20 --seed 1 --out tests/topology/data/slurm_block_states_sparse.json

Needs root, a Docker engine and the railgang/slurm:trixie image (scripts/slurm_image.sh trixie).
Inside the container the same file runs with ``--inside``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

RACKS, NODES_PER_RACK, GPUS = 4, 18, 4
BLOCK_SIZES = (18, 36, 72)
# (label, nodes, segment, exclusive=topo)
GANGS: tuple[tuple[str, int, int, bool], ...] = (
    ("4 nodes (16 GPUs)", 4, 0, False),
    ("9 nodes (36 GPUs)", 9, 0, False),
    ("18 nodes, a whole rack", 18, 0, False),
    ("12 nodes --segment=6", 12, 6, False),
    ("24 nodes, two racks", 24, 0, False),
    ("16 nodes --segment=4", 16, 4, False),
    ("6 nodes --exclusive=topo", 6, 0, True),
)
LOADS = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
# "sparse": BlockSizes without the 2-rack level and lighter loads, so that multi-rack gangs start
# and eval_nodes_block's llblock path (blocks of 4 racks, at most ceil(N/18) racks used) is taken
SPARSE_GANGS: tuple[tuple[str, int, int, bool], ...] = (
    ("24 nodes, two racks", 24, 0, False),
    ("30 nodes", 30, 0, False),
    ("20 nodes --segment=10", 20, 10, False),
    ("12 nodes", 12, 0, False),
    ("40 nodes, three racks", 40, 0, False),
)
PROFILES: dict[str, tuple[tuple[int, ...], tuple[float, ...], tuple[tuple[str, int, int, bool], ...]]] = {
    "default": (BLOCK_SIZES, LOADS, GANGS),
    "sparse": ((18, 72), (0.0, 0.0, 0.25, 0.5, 0.75), SPARSE_GANGS),
}


def node_names() -> list[str]:
    return [f"n{i:02d}" for i in range(1, RACKS * NODES_PER_RACK + 1)]  # the devcluster's names


def topology_conf(sizes: tuple[int, ...] = BLOCK_SIZES) -> str:
    names = node_names()
    lines = [f"BlockName=rack{r + 1} Nodes=n[{names[r * NODES_PER_RACK][1:]}-{names[(r + 1) * NODES_PER_RACK - 1][1:]}]"
             for r in range(RACKS)]
    return "\n".join([*lines, "BlockSizes=" + ",".join(map(str, sizes))]) + "\n"


def draw_busy(rng: random.Random, loads: tuple[float, ...] = LOADS) -> dict[str, int]:
    """Busy GPUs per node: each rack at its own load; a few nodes half used."""
    names = node_names()
    busy: dict[str, int] = {}
    for r in range(RACKS):
        load = rng.choice(loads)
        for n in names[r * NODES_PER_RACK:(r + 1) * NODES_PER_RACK]:
            if rng.random() < load:
                busy[n] = GPUS
            elif rng.random() < 0.1:
                busy[n] = rng.randint(1, GPUS - 1)
    return busy


class _Slurm:
    """The Slurm commands one recording needs, against the container's cluster."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def sh(self, *argv: str, check: bool = True) -> str:
        res = subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=120, check=False)
        if check and res.returncode:
            raise RuntimeError(f"{' '.join(argv)}: {res.stderr.strip()}")
        return res.stdout + res.stderr

    def jobs(self) -> list[dict[str, Any]]:
        return list(json.loads(self.sh("squeue", "--json")).get("jobs", []))

    @staticmethod
    def state_of(j: dict[str, Any]) -> str:
        s = j.get("job_state")
        return s[0] if isinstance(s, list) and s else str(s)

    def sbatch(self, *args: str) -> str:
        out = self.sh("sbatch", "--parsable", "--account=team-a", "--output=/dev/null", "--time=60",
                      "--mem=100", *args, "--wrap=sleep 3000")
        return out.strip().split(";")[0].splitlines()[0]

    def wait(self, ids: set[str], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if ids <= {str(j["job_id"]) for j in self.jobs() if self.state_of(j) == "RUNNING"}:
                return True
            time.sleep(0.5)
        return False

    def reset(self, drained: list[str]) -> None:
        self.sh("scancel", "--user=root")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(self.state_of(j) in ("RUNNING", "PENDING", "COMPLETING")
                                                   for j in self.jobs()):
            time.sleep(0.5)
        self.sh("scontrol", "update", f"nodename={','.join(drained)}", "state=resume")


def _one_state(sl: _Slurm, s: int, rng: random.Random, profile: str) -> dict[str, Any]:
    _, loads, gangs = PROFILES[profile]
    label, nodes, segment, exclusive = gangs[s % len(gangs)]
    busy = draw_busy(rng, loads)
    ids = {sl.sbatch(f"--nodelist={n}", "--nodes=1", f"--gres=gpu:{k}", f"--rg-parallel=tp1,dp{k}")
           for n, k in busy.items()}
    if not sl.wait(ids, 180):
        raise RuntimeError("filler jobs did not all start")
    drained = rng.sample([n for n in node_names() if busy.get(n, 0) == 0] or node_names(), 2)
    sl.sh("scontrol", "update", f"nodename={','.join(drained)}", "state=drain", "reason=lame-hca")
    extra = ([f"--segment={segment}"] if segment else []) + (["--exclusive=topo"] if exclusive else [])
    try:
        job = sl.sbatch(f"--nodes={nodes}", f"--gres=gpu:{GPUS}", f"--rg-parallel=tp{GPUS},dp{nodes}", *extra)
    except RuntimeError as exc:
        raise RuntimeError(f"state {s}: the gang was refused: {exc}") from exc
    started = sl.wait({job}, 20)
    raw = next((j for j in sl.jobs() if str(j["job_id"]) == job), {})
    got = sl.sh("scontrol", "show", "job", "-d", "-o", job, check=False) if started else ""
    hosts = sl.sh("scontrol", "show", "hostnames", _field(got, "NodeList")).split() if started else []
    sl.reset(drained)
    return {"state": s, "gang": label, "nodes": nodes, "segment": segment, "exclusive_topo": exclusive,
            "busy": busy, "drained": drained, "slurmctld": hosts if started else None,
            "reason": None if started else _reason(raw)}


def _inside(work: Path, states: int, seed: int, port_base: int, profile: str) -> list[dict[str, Any]]:
    from railgang.devcluster.cluster import DevCluster, slurm_env
    from railgang.devcluster.layout import ClusterSpec

    class BlockCluster(DevCluster):
        def _write_tree(self) -> None:
            super()._write_tree()
            etc = self.spec.etc
            (etc / "topology.conf").write_text(topology_conf(PROFILES[profile][0]))
            conf = (etc / "slurm.conf").read_text()
            (etc / "slurm.conf").write_text(conf.replace("TopologyPlugin=topology/tree", "TopologyPlugin=topology/block"))

    spec = ClusterSpec(dir=work / "cluster", nodes=RACKS * NODES_PER_RACK, gpus_per_node=GPUS,
                       nodes_per_leaf=NODES_PER_RACK, slurmctld_port=port_base, slurmdbd_port=port_base + 2,
                       mariadb_port=port_base - 511, slurmd_base_port=port_base + 83, cpus_per_node=4,
                       memory_mb_per_node=16384)
    assert list(spec.node_names) == node_names(), spec.node_names[:3]
    cluster = BlockCluster(spec)
    cluster.down()
    cluster.up(timeout_s=300)
    rng = random.Random(seed)
    try:
        sl = _Slurm(slurm_env(spec))
        return [_one_state(sl, s, rng, profile) for s in range(states)]
    finally:
        cluster.down()


def _field(line: str, key: str) -> str:
    for part in line.split():
        if part.startswith(key + "="):
            return part[len(key) + 1:]
    return ""


def _reason(raw: dict[str, Any]) -> str:
    r = raw.get("state_reason")
    return str(r) if r else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=42)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("tests/topology/data/slurm_block_states.json"))
    ap.add_argument("--port-base", type=int, default=28017)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="default")
    ap.add_argument("--inside", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside is not None:
        recorded = _inside(args.inside, args.states, args.seed, args.port_base, args.profile)
        print(json.dumps(recorded))
        return
    from tests.slurm_versions.container import SlurmContainer

    box = SlurmContainer(f"railgang-block-states-{os.getpid()}", "trixie")
    t0 = time.monotonic()
    box.start()
    try:
        res = box.exec(["python3", "/src/benchmarks/slurm/block_states.py", "--inside", "/var/tmp/block-states",
                        "--states", str(args.states), "--seed", str(args.seed), "--profile", args.profile,
                        "--port-base", str(args.port_base)], timeout=3600)
    finally:
        box.stop()
    recorded = json.loads(res.stdout.strip().splitlines()[-1])
    doc = {"slurm": "24.11.5 (Debian trixie)", "racks": RACKS, "nodes_per_rack": NODES_PER_RACK, "gpus": GPUS,
           "block_sizes": list(PROFILES[args.profile][0]), "seed": args.seed, "profile": args.profile,
           "states": recorded}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    placed = sum(1 for r in recorded if r["slurmctld"])
    print(f"{len(recorded)} states recorded ({placed} placed) in {time.monotonic() - t0:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
