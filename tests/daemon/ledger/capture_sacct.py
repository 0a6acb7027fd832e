"""Capture the sacct fixtures of tests/daemon/ledger from a real local Slurm 22.05 cluster.

Run as root (it brings up its own devcluster under RAILGANG_DEVCLUSTER__DIR):
    python tests/daemon/ledger/capture_sacct.py OUTDIR
Jobs: a finished 2-node job, a 4-node job shrunk twice (RESIZING records), a requeued job, one
still running at capture time, and one carrying ledger labels in its comment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from railgang.daemon.config import load_settings
from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.devcluster.layout import ClusterSpec


def main(out: Path) -> None:
    s = load_settings().devcluster
    spec = ClusterSpec(dir=s.dir, slurmctld_port=s.slurmctld_port, slurmdbd_port=s.slurmdbd_port,
                       mariadb_port=s.mariadb_port, slurmd_base_port=s.slurmd_base_port)
    cluster = DevCluster(spec)
    cluster.down()
    cluster.up()
    env = slurm_env(spec)

    def sl(*argv: str) -> str:
        return subprocess.run(list(argv), capture_output=True, text=True, env=env, check=True,
                              timeout=60).stdout

    def submit(*opts: str, cmd: str) -> str:
        return sl("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *opts,
                  f"--wrap={cmd}").strip().split(";")[0]

    def wait(job: str, state: str) -> None:
        for _ in range(200):
            if f"JobState={state}" in sl("scontrol", "show", "job", "-o", job):
                return
            time.sleep(0.2)
        raise SystemExit(f"job {job} never reached {state}")

    try:
        done = submit("--account=team-b", "-N2", "--gres=gpu:4", cmd="sleep 2")
        shrunk = submit("--account=team-a", "-N4", "--gres=gpu:8", cmd="sleep 12")
        labelled = submit("--account=team-a", "-N1", "--gres=gpu:2",
                          "--comment=rg-labels:experiment=llm-7b,model=v3", cmd="sleep 3")
        requeued = submit("--account=team-b", "-N1", "--gres=gpu:8", cmd="sleep 6")
        wait(shrunk, "RUNNING")
        time.sleep(2)
        sl("scontrol", "update", f"jobid={shrunk}", "NumNodes=2")
        time.sleep(2)
        sl("scontrol", "update", f"jobid={shrunk}", "NumNodes=1")
        wait(requeued, "RUNNING")
        time.sleep(2)
        sl("scontrol", "requeue", requeued)
        time.sleep(1)
        sl("scontrol", "update", f"jobid={requeued}", "StartTime=now")
        wait(requeued, "RUNNING")
        running = submit("--account=team-a", "-N2", "--gres=gpu:8", cmd="sleep 300")
        wait(running, "RUNNING")
        for job in (done, shrunk, labelled, requeued):
            wait(job, "COMPLETED")
        time.sleep(3)  # let slurmdbd catch up
        out.mkdir(parents=True, exist_ok=True)
        data = json.loads(sl("sacct", "--json", "-a", "-S", "now-1hour", "-E", "now"))
        (out / "sacct_22.05_window.json").write_text(json.dumps(data, indent=1, sort_keys=True))
        empty = subprocess.run(["sacct", "--json", "-a", "-S", "2020-01-01T00:00:00",
                                "-E", "2020-01-01T00:01:00"], capture_output=True, text=True,
                               env=env, timeout=60)
        (out / "sacct_22.05_empty.json").write_text(empty.stdout)
        meta = {"done": done, "shrunk": shrunk, "labelled": labelled, "requeued": requeued,
                "running": running}
        (out / "jobs.json").write_text(json.dumps(meta, indent=1))
        print(json.dumps(meta))
    finally:
        cluster.down()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
