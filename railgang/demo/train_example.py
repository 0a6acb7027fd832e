#!/usr/bin/env python3
"""A runnable example of the training-side contract (no GPU and no torch needed).

It "trains" for ``--steps`` steps whose duration shrinks with the data-parallel degree it holds,
checkpoints every ``--checkpoint-every`` steps into ``--checkpoint-dir``, resumes from the last
checkpoint after a requeue, checks its size with Slurm every few steps (railgang may shrink it in
place), reports progress through its Slurm Comment, and on the preemption signal writes a last
checkpoint and waits to be requeued. The same signal before a shrink comes with a notice (the new
size, when it applies): it checkpoints, says it is ready and goes on (docs/training.md). Replace the body of ``train_step`` with real work and the
rest stays the same.

    sbatch --account=team-a -N2 --gres=gpu:8 --rg-parallel=tp8,dp2 --rg-elastic=1:2 \\
        --wrap="exec python3 -m railgang.demo.train_example --steps 200"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from railgang.training import TrainingContext


def train_step(replicas: int, step_s: float, serial: float = 0.0) -> float:
    """One optimiser step: fixed work shared by the replicas (stands in for forward/backward),
    of which the ``serial`` share does not get faster with more replicas (Amdahl; 0 = linear)."""
    took = step_s * (serial + (1.0 - serial) / max(1, replicas))
    time.sleep(took)
    return 32.0 / took  # samples/s: a step is one global batch of 32 samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-s", type=float, default=1.0, help="seconds per step on one replica")
    ap.add_argument("--compute-share", type=float, default=0.8,
                    help="share of a step the kernels compute (a real job reads its profiler)")
    ap.add_argument("--serial-share", type=float, default=0.0,
                    help="share of a one-replica step more replicas do not speed up (Amdahl)")
    ap.add_argument("--report-every-s", type=float, default=10.0,
                    help="at most one progress report this often")
    ap.add_argument("--checkpoint-every", type=int, default=10)
    ap.add_argument("--checkpoint-dir", type=Path,
                    default=Path(os.environ.get("RAILGANG_CHECKPOINT_DIR", "/tmp/railgang-ckpt")))
    ap.add_argument("--resize-check-every", type=int, default=5)
    ap.add_argument("--hang-at", type=int, default=None,
                    help="fault injection: on the first run, stop at this step without a word, "
                         "as a job stuck in a collective does (the daemon's hang detection)")
    args = ap.parse_args(argv)

    ctx = TrainingContext(report_every_s=args.report_every_s)
    ctx.install_signal_handlers()
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    ckpt = args.checkpoint_dir / f"job-{ctx.job_id or 'local'}.json"

    step = json.loads(ckpt.read_text())["step"] if ckpt.exists() else 0
    replicas = max(1, ctx.shape.dp)
    print(f"job {ctx.job_id}: start at step {step} (restart {ctx.restart_count}), "
          f"shape tp{ctx.shape.tp} pp{ctx.shape.pp} dp{ctx.shape.dp}", flush=True)

    def save(reason: str) -> None:
        tmp = ckpt.with_suffix(".tmp")
        tmp.write_text(json.dumps({"step": step, "replicas": replicas, "time": time.time()}))
        tmp.replace(ckpt)  # atomic: a kill mid-write leaves the previous checkpoint
        print(f"checkpoint at step {step} ({reason})", flush=True)

    while step < args.steps:
        if ctx.stop_requested and (notice := ctx.pending_resize()) is not None:
            save("shrink notice")  # what a rank on a node being dropped would lose otherwise
            print(f"shrink notice: {replicas} -> {notice.replicas(ctx.shape.replica_gpus)} replicas "
                  f"by {notice.applies_at:.0f}", flush=True)
            ctx.ready_for_resize(step)  # shrink now, not at the deadline; the run goes on
            continue
        if ctx.stop_requested:
            save("preempted")
            print("waiting for the requeue", flush=True)
            ctx.wait_for_requeue()
            return 0
        if ctx.job_id and step % args.resize_check_every == 0:
            try:
                now = ctx.world().replicas(ctx.shape)
            except (RuntimeError, OSError, ValueError) as exc:
                print(f"size check failed, keeping {replicas} replicas: {exc}", flush=True)
                now = replicas
            if now and now != replicas:
                print(f"resized: {replicas} -> {now} data-parallel replicas", flush=True)
                replicas = now
        if args.hang_at is not None and step == args.hang_at and ctx.restart_count == 0:
            print(f"hanging at step {step} (--hang-at)", flush=True)
            while True:  # deaf to signals as a stuck NCCL call: Slurm's SIGKILL ends it
                time.sleep(1.0)
        began = time.monotonic()
        sps = train_step(replicas, args.step_s, min(1.0, max(0.0, args.serial_share)))
        took = time.monotonic() - began
        step += 1
        if ctx.job_id:  # total: the daemon knows the work left; step/compute: comm-bound check
            ctx.report(step, sps, total=args.steps, step_s=took,
                       compute_s=took * min(1.0, max(0.0, args.compute_share)))
        if step % args.checkpoint_every == 0:
            save("periodic")
    save("done")
    print(f"finished {args.steps} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
