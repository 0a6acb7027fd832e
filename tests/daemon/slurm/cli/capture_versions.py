"""Record the per-version fixtures of data/ (``squeue_VERSION.json`` …) from a real cluster.

The same scenario on every Slurm version, so the unit tests can check that each version's reader
builds the same logical snapshot. Run as root where that version's Slurm is installed (natively
for 22.05; inside ``railgang/slurm:trixie`` for 24.11, see tests/slurm_versions/):
    python tests/daemon/slurm/cli/capture_versions.py OUTDIR --port-base 13817 [--pinned v0.0.42,...]
It brings up its own 4-node × 8-GPU cluster (2 leaves of 2 nodes, accounting on) under
OUTDIR/cluster and takes it down again. Jobs (no daemon runs: hinted jobs get no lease):
  hinted   tp8 (hinted, AdminComment tag), 1 node × 8 GPUs, unlimited time limit, running
  resized  -N2 --gres=gpu:8, shrunk to 1 node, running
  small    --gres=gpu:4, 30 min limit, running
  requeued ran, then `scontrol requeue`: pending again (BeginTime)
  gang     hinted tp8,dp2, 2 nodes × 8 GPUs: pending (Resources)
  held     --hold: pending (JobHeldUser)
and node n04 drained with a reason, n02 tagged with the feature rg_lame (sinfo is read
node-oriented, ``--Node``, as the backend reads it). ``--pinned`` also records squeue/sinfo with
``--json=VERSION`` for each data_parser version given (23.02+), as ``squeue_26.05_v0.0.42.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.devcluster.layout import ClusterSpec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--port-base", type=int, default=13817)
    ap.add_argument("--pinned", default="", help="comma list of data_parser versions")
    args = ap.parse_args()
    out: Path = args.out.resolve()
    base: int = args.port_base
    spec = ClusterSpec(dir=out / "cluster", nodes=4, nodes_per_leaf=2, slurmctld_port=base,
                       slurmdbd_port=base + 2, mariadb_port=base - 511, slurmd_base_port=base + 83)
    cluster = DevCluster(spec)
    cluster.down()
    cluster.up()
    env = slurm_env(spec)

    def sl(*argv: str, check: bool = True) -> str:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, check=check,
                              timeout=60).stdout

    def submit(*opts: str) -> str:
        return sl("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *opts,
                  "--wrap=sleep 900").strip().split(";")[0]

    def wait(job: str, state: str) -> None:
        for _ in range(300):
            if f"JobState={state}" in sl("scontrol", "show", "job", "-o", job):
                return
            time.sleep(0.2)
        raise SystemExit(f"job {job} never reached {state}")

    try:
        version = sl("sinfo", "--version").split()[-1].rsplit(".", 1)[0]  # 22.05, 24.11
        jobs = {}
        jobs["hinted"] = submit("--account=team-a", "-N1", "--gres=gpu:8", "--time=UNLIMITED",
                                "--job-name=hinted", "--comment=rg:parallel=tp8")
        wait(jobs["hinted"], "RUNNING")
        jobs["resized"] = submit("--account=team-b", "-N2", "--gres=gpu:8", "--time=60",
                                 "--job-name=resized")
        wait(jobs["resized"], "RUNNING")
        time.sleep(1)
        sl("scontrol", "update", f"jobid={jobs['resized']}", "NumNodes=1")
        jobs["small"] = submit("--account=team-a", "-N1", "--gres=gpu:4", "--time=30",
                               "--job-name=small")
        wait(jobs["small"], "RUNNING")
        jobs["requeued"] = submit("--account=team-b", "-N1", "--gres=gpu:4", "--time=20",
                                  "--job-name=requeued")
        wait(jobs["requeued"], "RUNNING")
        time.sleep(1)
        sl("scontrol", "requeue", jobs["requeued"])
        wait(jobs["requeued"], "PENDING")
        jobs["gang"] = submit("--account=team-a", "-N2", "--gres=gpu:8", "--time=120",
                              "--job-name=gang", "--comment=rg:parallel=tp8,dp2")
        jobs["held"] = submit("--account=team-b", "-N1", "--gres=gpu:2", "--hold",
                              "--job-name=held")
        sl("scontrol", "update", "nodename=n04", "state=drain", "reason=lame IB link")
        sl("scontrol", "update", "nodename=n02", "AvailableFeatures=rg_lame",
           "ActiveFeatures=rg_lame")
        time.sleep(4)  # slurmdbd catches up; the pending jobs get their reasons
        out.mkdir(parents=True, exist_ok=True)

        def record(name: str, *argv: str) -> None:
            text = sl(*argv, check=False)
            if name.endswith(".json"):
                text = json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
            (out / name).write_text(text)

        record(f"squeue_{version}.json", "squeue", "--json")
        record(f"sinfo_{version}.json", "sinfo", "--json", "--Node")
        for pinned in filter(None, args.pinned.split(",")):
            record(f"squeue_{version}_{pinned}.json", "squeue", f"--json={pinned}")
            record(f"sinfo_{version}_{pinned}.json", "sinfo", f"--json={pinned}", "--Node")
        record(f"sacct_{version}.json", "sacct", "--json", "-a", "-S", "now-1hour", "-E", "now")
        record(f"scontrol_topology_{version}.txt", "scontrol", "show", "topology")
        record(f"sshare_{version}.txt", "sshare", "-a", "-P", "-n", "-o",
               "Account,User,NormShares,RawUsage")
        (out / f"jobs_{version}.json").write_text(json.dumps(jobs, indent=1) + "\n")
        print(json.dumps({"version": version, **jobs}))
    finally:
        cluster.down()


if __name__ == "__main__":
    main()
