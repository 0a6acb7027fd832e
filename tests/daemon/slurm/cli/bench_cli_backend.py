"""Slurm processes and wall time per CliBackend call on a running cluster (docs/slurm-backend.md).

    SLURM_CONF=/path/to/slurm.conf python tests/daemon/slurm/cli/bench_cli_backend.py --leased 40 --plain 10

Submits ``--plain`` running 2-GPU jobs and ``--leased`` hinted jobs (a fresh heartbeat beside
slurm.conf in ../run/ makes job_submit.lua lease them), measures snapshot, lease renewal, batched
SetPriority and Start, then cancels everything it submitted. Needs the local devcluster.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.actions import SetPriority, Start
from railgang.daemon.slurm.cli import CliBackend, write_heartbeat


def sbatch(workdir: Path, *opts: str) -> str:
    res = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", f"--chdir={workdir}",
                          "--account=team-a", *opts, "--wrap=sleep 600"],
                         capture_output=True, text=True, check=True)
    return res.stdout.strip().split(";")[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--leased", type=int, default=40)
    ap.add_argument("--plain", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    conf = Path(os.environ["SLURM_CONF"])
    heartbeat = conf.parent.parent / "run" / "railgang" / "heartbeat"
    write_heartbeat(heartbeat, time.time(), 600)
    workdir = Path("/tmp")
    plain = [sbatch(workdir, "-N1", "--gres=gpu:2") for _ in range(args.plain)]
    leased = [sbatch(workdir, "-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8;class=3")
              for _ in range(args.leased)]
    backend = CliBackend(SlurmSettings(conf=conf, lease_s=600))
    try:
        time.sleep(2)

        def measure(name: str, fn: Callable[[], object]) -> None:
            times, calls = [], []
            for _ in range(args.repeat):
                before, t0 = backend.runner.calls, time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
                calls.append(backend.runner.calls - before)
            print(f"{name:28s} median {statistics.median(times) * 1000:7.1f} ms  "
                  f"max {max(times) * 1000:7.1f} ms  processes {statistics.mean(calls):.1f}")

        snap = backend.snapshot(time.time())
        print(f"jobs in squeue: {len(backend.last.jobs) if backend.last else 0}, "
              f"railgang queue: {len(snap.pending)}")
        measure("snapshot", lambda: backend.snapshot(time.time()))
        measure(f"renew_leases x{len(leased)}", lambda: backend.renew_leases(leased, time.time()))
        measure(f"apply SetPriority x{len(leased)}", lambda: backend.apply(
            [SetPriority(j, 1000 + i) for i, j in enumerate(leased)], time.time()))
        nodes = sorted(n for n, f in snap.free.items() if len(f) == 8)
        starts = [Start(j, {n: tuple(range(8))}, 1) for j, n in zip(leased, nodes, strict=False)]
        before, t0 = backend.runner.calls, time.perf_counter()
        results = backend.apply(starts, time.time())
        print(f"{'apply Start x' + str(len(starts)):28s} {(time.perf_counter() - t0) * 1000:7.1f} ms  "
              f"processes {backend.runner.calls - before}  ok {sum(r.ok for r in results)}")
    finally:
        subprocess.run(["scancel", *plain, *leased], check=False)
        heartbeat.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
