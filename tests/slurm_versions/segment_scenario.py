"""What tests/slurm_versions/test_segment_2605.py runs *inside* the sid container (Slurm 26.05,
no pytest): job_submit.lua's ``--segment`` from ``--rg-parallel`` on a topology/block cluster of
two blocks (4 nodes × 4 GPUs each, ``BlockSizes=4,8``) with ``RAILGANG_SEGMENT_BASE=4`` in
slurmctld's environment, and no daemon (Slurm places the jobs itself, as when the daemon is down).

One node of each block is busy, so each block has 3 free nodes and a 4-node gang must span both.
A gang of tp4,pp2,dp2 on 4-GPU nodes (a replica = 2 nodes) is submitted twice: once without the
base (no segment: 26.05 keeps a job of a base block's size inside one block, so it waits,
``No_suitable_topology_unit_found``, until a whole block is free) and once with it
(``--segment=2``: it starts at once, each replica's 2 nodes inside one block). A third run has
the daemon alive: the gang waits under its lease and ``railgang daemon run --once`` (the non-root
daemon user) places it, and Slurm accepts that placement with the segment set. Printed: one JSON
object of what was seen.

    cd /src && python3 -m tests.slurm_versions.segment_scenario WORKDIR --port-base 28317
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
import traceback
from pathlib import Path
from typing import Any

from railgang.daemon.slurm.cli import write_heartbeat
from railgang.devcluster.cluster import slurm_env
from railgang.devcluster.layout import ClusterSpec
from tests.slurm_versions.block_scenario import GPUS, PER, BlockCluster, block_spec, daemon_cycles


class SegmentCluster(BlockCluster):
    """The block cluster with job_submit.lua told the base block (or not: ``base`` None)."""

    def __init__(self, spec: ClusterSpec, base: int | None) -> None:
        super().__init__(spec)
        self.base = base

    def job_submit_env(self) -> dict[str, str]:
        return {} if self.base is None else {"RAILGANG_SEGMENT_BASE": str(self.base)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("work", type=Path)
    ap.add_argument("--port-base", type=int, default=28317)
    args = ap.parse_args()
    spec = block_spec(args.work, args.port_base)
    out: dict[str, Any] = {}
    for label, seg_base in (("without", None), ("with", PER), ("daemon", PER)):
        cluster = SegmentCluster(spec, seg_base)
        cluster.down()
        try:
            cluster.up(timeout_s=120)
            out[label] = run(spec, args.work, daemon=label == "daemon")
        except Exception as exc:  # reported, not raised: the host test shows what was reached
            out[label] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-2000:]}
        finally:
            cluster.down()
    print(json.dumps(out))


def run(spec: ClusterSpec, work: Path, daemon: bool = False) -> dict[str, Any]:
    env = slurm_env(spec)
    script = work / "job.sh"
    script.write_text("#!/bin/bash\nsleep 600\n")
    script.chmod(0o755)

    def sl(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, check=True, timeout=60)

    def sbatch(*opts: str) -> tuple[str, str]:
        res = sl("sbatch", "--parsable", f"--chdir={work}", "--output=/dev/null", *opts, str(script))
        return res.stdout.strip().split(";")[0], res.stderr.strip()

    def show(job: str) -> dict[str, str]:
        return dict(p.split("=", 1) for p in sl("scontrol", "show", "job", "-o", job).stdout.split() if "=" in p)

    def running(job: str, timeout: float = 60, check: bool = True) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while (rec := show(job)).get("JobState") != "RUNNING":
            if time.monotonic() > deadline:
                if not check:
                    return rec
                raise AssertionError(f"job {job}: {rec.get('JobState')} ({rec.get('Reason')})")
            time.sleep(0.3)
        return rec

    seen: dict[str, Any] = {"slurm": sl("sinfo", "--version").stdout.strip()}
    names = list(spec.node_names)
    # the first node of each block busy: 3 free in each, so a 4-node gang spans both blocks
    for n in (names[0], names[PER]):
        running(sbatch("--account=team-b", "-N1", f"--gres=gpu:{GPUS}", f"--nodelist={n}")[0])
    if daemon:  # alive: the gang waits under its lease, and the daemon places it
        write_heartbeat(spec.heartbeat_file, time.time(), 600)
    gang, said = sbatch("--account=team-a", "-N4", f"--gres=gpu:{GPUS}",
                        "--comment=rg:parallel=tp4,pp2,dp2;class=3")
    if daemon:
        seen["lease"] = show(gang).get("Reason")
        seen["cycle"] = daemon_cycles(spec, work, {})()
    rec = running(gang, timeout=30, check=False)  # Slurm's own scheduler passes run every few s
    placed = rec.get("JobState") == "RUNNING"
    seen["gang"] = {"said": said, "segment": {k: v for k, v in rec.items() if "egment" in k},
                    "state": rec.get("JobState"), "reason": rec.get("Reason"),
                    "admin_comment": rec.get("AdminComment", ""),
                    "nodes": sl("scontrol", "show", "hostnames", rec["NodeList"]).stdout.split() if placed else []}
    seen["blocks"] = [names[:PER], names[PER:]]
    return seen


if __name__ == "__main__":
    main()
