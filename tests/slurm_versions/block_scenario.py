"""What tests/slurm_versions/test_block_2411.py runs *inside* the trixie container (Slurm 24.11,
no pytest): a topology/block cluster of two NVL-style blocks (4 nodes × 4 GPUs each,
``BlockSizes=4,8``), every node busy with a batch job, and ``railgang daemon run --once`` with
``slurm.blocks_nvlink`` and ``daemon.whole_domain_evict``. Two production gangs then arrive under
the daemon's lease: a TP-8 gang of two nodes and a TP-16 gang that needs a whole block. Printed:
one JSON object of what was seen, each step's facts kept even when a later one fails.

    python3 block_scenario.py WORKDIR --port-base 28217 [--node-by-node]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from railgang.daemon.slurm.cli import write_heartbeat
from railgang.devcluster.cluster import DevCluster, daemon_uid, slurm_env
from railgang.devcluster.layout import ClusterSpec

RAILGANG = str(Path(sys.executable).with_name("railgang"))
PER, GPUS = 4, 4


class BlockCluster(DevCluster):
    """The devcluster with topology/block: one block per leaf of ``nodes_per_leaf`` nodes."""

    def _write_tree(self) -> None:
        super()._write_tree()
        etc, names = self.spec.etc, list(self.spec.node_names)
        (etc / "topology.conf").write_text("".join(
            f"BlockName=b{b + 1} Nodes={','.join(names[b * PER:(b + 1) * PER])}\n"
            for b in range(len(names) // PER)) + f"BlockSizes={PER},{len(names)}\n")
        conf = (etc / "slurm.conf").read_text()
        (etc / "slurm.conf").write_text(conf.replace("TopologyPlugin=topology/tree", "TopologyPlugin=topology/block"))


def block_spec(work: Path, base: int) -> ClusterSpec:
    """Two blocks of ``PER`` nodes × ``GPUS`` GPUs under ``work``, ports from ``base``."""
    return ClusterSpec(dir=work / "cluster", nodes=2 * PER, gpus_per_node=GPUS, nodes_per_leaf=PER,
                       slurmctld_port=base, slurmdbd_port=base + 2, mariadb_port=base - 511,
                       slurmd_base_port=base + 83, cpus_per_node=4, memory_mb_per_node=16384)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--port-base", type=int, default=28217)
    ap.add_argument("--node-by-node", action="store_true", help="whole_domain_evict off: the scatter it removes")
    args = ap.parse_args()
    spec = block_spec(args.work, args.port_base)
    out: dict[str, Any] = {}
    cluster = BlockCluster(spec)
    cluster.down()
    t = time.monotonic()
    cluster.up(timeout_s=120)
    out["up_s"] = round(time.monotonic() - t, 1)
    try:
        run(spec, args.work, out, whole=not args.node_by_node)
    except Exception as exc:  # reported, not raised: the host test shows what was reached
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()[-2000:]
    finally:
        cluster.down()
    print(json.dumps(out))


def daemon_cycles(spec: ClusterSpec, work: Path, settings: dict[str, str]) -> Callable[[], dict[str, Any]]:
    """One ``railgang daemon run --once`` per call, as the non-root daemon user of the documented
    deployment, with ``settings`` (RAILGANG_* variables) over a lease of 600 s and no leaf wait."""
    env = slurm_env(spec)
    uid = daemon_uid()
    if uid is None:
        raise RuntimeError("devcluster up did not create the daemon user")
    home = work / "daemon-home"
    home.mkdir(mode=0o755, exist_ok=True)
    os.chown(home, uid, pwd.getpwuid(uid).pw_gid)
    os.chown(spec.heartbeat_file, uid, -1)
    as_daemon = ["setpriv", f"--reuid={uid}", f"--regid={pwd.getpwuid(uid).pw_gid}", "--clear-groups", RAILGANG]
    denv = {**os.environ, **env, "RAILGANG_CONFIG": "", "HOME": str(home), "RAILGANG_HOME": str(home),
            "RAILGANG_DB__URL": f"sqlite:///{home / 'rg.sqlite'}",
            "RAILGANG_LEDGER__GRANTS_FILE": str(home / "class_grants.txt"),
            "RAILGANG_SLURM__BACKEND": "cli", "RAILGANG_SLURM__CONF": str(spec.slurm_conf),
            "RAILGANG_SLURM__LEASE_S": "600", "RAILGANG_SLURM__LEASE_RENEW_BEFORE_S": "600",
            "RAILGANG_DAEMON__LEAF_WAIT_S": "0", "RAILGANG_DAEMON__HEARTBEAT_FILE": str(spec.heartbeat_file),
            "RAILGANG_DAEMON__METRICS_PORT": "0", "RAILGANG_DAEMON__POLICY": "fifo", **settings}

    def cycle() -> dict[str, Any]:
        res = subprocess.run([*as_daemon, "daemon", "run", "--once", "--log-format", "json"],
                             env=denv, capture_output=True, text=True, timeout=120)
        logged = [json.loads(x) for x in res.stderr.splitlines() if x.startswith("{")]
        return {"rc": res.returncode, "stderr": res.stderr[-1200:] if res.returncode else "",
                "errors": [x for x in logged if x.get("level") in ("ERROR", "error")][:3]}

    return cycle


def run(spec: ClusterSpec, work: Path, out: dict[str, Any], whole: bool = True) -> None:
    env = slurm_env(spec)
    script = work / "job.sh"
    script.write_text("#!/bin/bash\ntrap '' USR1\nsleep 600\n")  # checkpoints nothing: requeued
    script.chmod(0o755)

    def sl(*argv: str) -> str:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, check=True, timeout=60).stdout

    def sbatch(*opts: str) -> str:
        return sl("sbatch", "--parsable", f"--chdir={work}", "--output=/dev/null", *opts, str(script)).strip().split(";")[0]

    def show(job: str) -> dict[str, str]:
        return dict(p.split("=", 1) for p in sl("scontrol", "show", "job", "-o", job).split() if "=" in p)

    def wait(job: str, key: str, value: str, timeout: float = 60) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while (rec := show(job)).get(key) != value:
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job}: {key}={rec.get(key)}, not {value}")
            time.sleep(0.3)
        return rec

    out["slurm"] = sl("sinfo", "--version").strip()
    out["topology"] = sl("scontrol", "show", "topology").strip().splitlines()
    names = list(spec.node_names)
    # every node busy with a tagged batch job that Slurm starts itself (no daemon heartbeat yet),
    # submitted alternating between the blocks: the victims the node-by-node search ranks first
    # (latest started, then job id) lie in both blocks, so only a whole-block search frees one
    order = [n for pair in zip(names[:PER], names[PER:], strict=True) for n in pair]
    fillers = {n: sbatch("--account=team-b", "-N1", f"--gres=gpu:{GPUS}", f"--nodelist={n}", "--requeue",
                         "--comment=rg:parallel=tp4;class=3") for n in order}
    for job in fillers.values():
        wait(job, "JobState", "RUNNING")
    out["fillers"] = fillers
    write_heartbeat(spec.heartbeat_file, time.time(), 600)
    block = sbatch("--account=team-a", f"-N{PER}", f"--gres=gpu:{GPUS}", "--time=UNLIMITED",
                   "--comment=rg:parallel=tp16;class=1")
    wait(block, "Reason", "BeginTime")
    cycle = daemon_cycles(spec, work, {
        "RAILGANG_SLURM__BLOCKS_NVLINK": "true", "RAILGANG_DAEMON__WHOLE_DOMAIN_EVICT": str(whole).lower(),
        "RAILGANG_DAEMON__PREEMPT_CHURN_CAP": "1.0", "RAILGANG_DAEMON__PREEMPT_GRACE_S": "1"})

    # 1. the whole-block gang: the daemon signals the batch jobs of one block, all of them
    out["cycle1"] = cycle()
    out["signalled"] = sorted(n for n, j in fillers.items() if "preempt=" in show(j).get("AdminComment", ""))
    # 2. after the grace (the job's checkpoint cost, 60 s by default): requeued, then started
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and show(block).get("JobState") != "RUNNING":
        time.sleep(5)
        out.setdefault("cycles", []).append(cycle())
    rec = show(block)
    out["block_gang"] = {"state": rec.get("JobState"), "nodes": sl("scontrol", "show", "hostnames",
                                                                     rec.get("NodeList", "")).split()
                         if rec.get("NodeList") not in (None, "", "(null)") else []}
    out["requeued"] = sorted(n for n, j in fillers.items() if show(j).get("JobState") == "PENDING")
    out["jobs"] = {"block": block}


if __name__ == "__main__":
    main()
