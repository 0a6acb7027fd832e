#!/usr/bin/env python3
"""A real PyTorch job that survives railgang's resizes (issue 39): DDP over Gloo on CPU, one rank
per node, a small MLP on a seeded synthetic regression set.

Three modes:

* ``launch`` is the batch script's body: it starts one ``srun`` step with a rank on every node
  the job holds now, and after a shrink (the ranks checkpointed on the notice and left) starts
  it again on the nodes that are left; after a preemption or a grow by requeue it keeps the
  allocation until Slurm requeues the job, which then restarts from the checkpoint.
* ``train`` is one rank (``srun`` sets ``SLURM_PROCID``/``SLURM_NTASKS``, or ``RANK``/
  ``WORLD_SIZE``; ``MASTER_ADDR``/``MASTER_PORT`` come from the job's rendezvous).
* ``reference`` runs the same training unresized as local processes, without Slurm.

The batch is chosen by global sample index and the global batch is kept at every size
(``keep_global``), so each step's update is the same sum at 1, 2 or 4 ranks: a resized run ends
at the unresized run's loss, up to floating-point summation order. Every step's loss goes to
``--loss-file`` (``step loss world epoch_time``), so steps done twice (lost to a resize) show.

    sbatch -N2 --gres=gpu:8 --rg-parallel=tp8,dp2 --rg-elastic=1:2 \\
        --wrap="exec python3 -m railgang.demo.torch_elastic launch --dir /shared/run1"
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from railgang.training import Rendezvous, TrainingContext, scale_batch

SAMPLES, FEATURES, HIDDEN = 1024, 8, 16
EXIT_DONE, EXIT_SHRINK, EXIT_REQUEUE = "done", "shrink", "requeue"


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("launch", "train", "reference"))
    ap.add_argument("--dir", type=Path, required=True, help="checkpoints, loss file, state")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--base-replicas", type=int, default=2, help="the size the lr was tuned at")
    ap.add_argument("--step-s", type=float, default=0.0,
                    help="extra seconds per step (stands in for a bigger model's compute)")
    ap.add_argument("--checkpoint-every", type=int, default=20)
    ap.add_argument("--hold-at", type=int, action="append", default=[],
                    help="wait at this step until the file DIR/go-STEP exists (tests pace the "
                         "run); repeatable")
    ap.add_argument("--launcher", choices=("auto", "torchrun", "srun"), default="auto",
                    help="launch: the ranks under torchrun's c10d rendezvous, or one srun task "
                         "per rank with env:// (auto: torchrun from torch 2 on; torch 1.13's "
                         "torchrun fails on Python 3.11, Debian 12's pair)")
    ap.add_argument("--world", type=int, default=2, help="reference: local processes")
    ap.add_argument("--port", type=int, default=29500, help="reference: the store's port")
    return ap.parse_args(argv)


def _log(args: argparse.Namespace, text: str) -> None:
    with (args.dir / "events.log").open("a") as f:
        f.write(f"{time.time():.3f} {text}\n")


# ---- one rank ----------------------------------------------------------------------------------

def _data(seed: int) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, FEATURES, generator=g, dtype=torch.float64)
    w = torch.randn(FEATURES, 1, generator=g, dtype=torch.float64)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(SAMPLES, 1, generator=g, dtype=torch.float64)
    return x, y


def _model(seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, 1)).double()


def _on_notice(args: argparse.Namespace, ctx: TrainingContext, rank: int, step: int,
               save: Callable[[str], None]) -> str:
    """Some rank heard the signal: rank 0 tells a shrink (a notice in flight) from a preemption or
    a grow by requeue, every rank learns which, the checkpoint is written, and for a shrink rank 0
    says ready. Returns why the ranks leave."""
    import torch
    import torch.distributed as dist

    kind = torch.zeros(1)
    if rank == 0:
        kind[0] = 1.0 if ctx.pending_resize() is not None else 2.0
    dist.broadcast(kind, 0)
    why = EXIT_SHRINK if kind[0] == 1.0 else EXIT_REQUEUE
    save(why)
    dist.barrier()  # the checkpoint is on disk before anyone says ready or leaves
    if why == EXIT_SHRINK and rank == 0:
        notice = ctx.pending_resize()
        ctx.ready_for_resize(step)
        _log(args, f"ready step={step} new_nodes={len(notice.nodes) if notice else '?'}")
    return why


def _hold(args: argparse.Namespace, ctx: TrainingContext, rank: int, step: int) -> bool:
    """Wait for DIR/go-STEP (rank 0 watches, the others wait in the broadcast); True when a signal
    came first (the caller handles it at the top of its loop and holds again after)."""
    import torch
    import torch.distributed as dist

    held = torch.zeros(1)
    if rank == 0:
        while not (args.dir / f"go-{step}").exists() and not ctx.stop_requested:
            time.sleep(0.1)
        held[0] = 1.0 if ctx.stop_requested else 0.0
    dist.broadcast(held, 0)
    return bool(held[0] > 0)


def train(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    env = os.environ
    rank = int(env.get("RANK", env.get("SLURM_PROCID", "0")))
    world = int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", "1")))
    ctx = TrainingContext(report_every_s=5.0)
    ctx.install_signal_handlers()
    # env://'s store without libuv (torch >= 2.4 asks for it; Debian's 2.6 is built without)
    os.environ.setdefault("USE_LIBUV", "0")
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    ckpt = args.dir / "checkpoint.pt"
    scaled = scale_batch(world, base_replicas=args.base_replicas,
                         base_global_batch=args.global_batch, base_lr=args.lr)
    if scaled.global_batch != args.global_batch:
        raise SystemExit(f"rank {rank}: {world} ranks do not divide the global batch "
                         f"{args.global_batch}; use a divisor for an exact resize")
    x, y = _data(args.seed)
    model = _model(args.seed)
    opt = torch.optim.SGD(model.parameters(), lr=scaled.lr, momentum=0.9)
    step = 0
    if ckpt.exists():
        saved = torch.load(ckpt)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        step = saved["step"]
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if rank == 0:
        _log(args, f"training world={world} step={step} restart={ctx.restart_count}")

    def save(why: str) -> None:
        if rank == 0:  # atomic: a kill mid-write leaves the previous checkpoint
            tmp = ckpt.with_suffix(".tmp")
            torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, tmp)
            tmp.replace(ckpt)
            _log(args, f"checkpoint step={step} ({why})")

    losses = (args.dir / "loss.txt").open("a", buffering=1) if rank == 0 else None
    why = EXIT_DONE
    flag = torch.zeros(1)
    holds = set(args.hold_at)
    began = time.monotonic()
    while step < args.steps:
        # every rank hears the signal at its own moment: agree on it at a step boundary
        flag[0] = 1.0 if ctx.stop_requested else 0.0
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag[0] > 0:
            why = _on_notice(args, ctx, rank, step, save)
            break
        if step in holds:
            if not _hold(args, ctx, rank, step):
                holds.discard(step)
            continue
        per = scaled.per_replica_batch
        idx = (torch.arange(args.global_batch) + step * args.global_batch) % SAMPLES
        mine = idx[rank * per:(rank + 1) * per]
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x[mine]), y[mine])
        loss.backward()  # DDP averages the ranks' gradients: the global batch's mean gradient
        opt.step()
        total = loss.detach().reshape(1) * per
        dist.all_reduce(total)
        step += 1
        if losses is not None:
            losses.write(f"{step} {total.item() / args.global_batch:.17g} {world} {time.time():.3f}\n")
        if args.step_s:
            time.sleep(args.step_s)
        if rank == 0 and ctx.job_id:
            ctx.report(step, step * args.global_batch / max(1e-9, time.monotonic() - began))
        if step % args.checkpoint_every == 0:
            save("periodic")
    if why == EXIT_DONE:
        save(EXIT_DONE)
    if rank == 0:
        (args.dir / "state.json").write_text(json.dumps({"why": why, "step": step}))
    dist.destroy_process_group()
    return 0


# ---- the batch script --------------------------------------------------------------------------

def _address(ctx: TrainingContext, host: str) -> str:
    """The rendezvous host's address: its name where DNS knows it, else Slurm's NodeAddr (the
    local test cluster's nodes are all 127.0.0.1 under names no resolver knows)."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        pass
    out = subprocess.run(["scontrol", "-o", "show", "node", host], capture_output=True,
                         text=True, timeout=30, check=False).stdout
    fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
    return fields.get("NodeAddr", host)


def _nodes(ctx: TrainingContext) -> list[str]:
    """The nodes the job holds now, as Slurm says (a slow slurmctld is asked again for a minute:
    the batch script must not die of one unanswered squeue)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return list(ctx.world().nodes)
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired):
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def _launcher(choice: str) -> str:
    if choice != "auto":
        return choice
    try:
        major = int(importlib.metadata.version("torch").split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return "srun"
    return "torchrun" if major >= 2 else "srun"


def _ranks_argv(launcher: str, ctx: TrainingContext, rdzv: Rendezvous,
                nodes: list[str]) -> list[str]:
    """One srun step over ``nodes``: a rank per node (srun, env://), or a torchrun agent per node
    that starts the rank after the c10d rendezvous at the job's endpoint (docs/training.md).
    torchrun's ``--nnodes=MIN:MAX``: MIN the job's elastic minimum (a replica is a node here),
    MAX the nodes it holds now, so the rendezvous closes as soon as they are all there."""
    rank_argv = ["-m", "railgang.demo.torch_elastic", "train",
                 *(a for a in sys.argv[1:] if a != "launch")]
    step = ["srun", f"-N{len(nodes)}", f"--nodelist={','.join(nodes)}", "--ntasks-per-node=1",
            "--kill-on-bad-exit=1"]
    if launcher == "srun":
        return [*step, sys.executable, *rank_argv]
    lo = min(len(nodes), ctx.shape.elastic_min or len(nodes))
    # the agent must outlive the notice (scancel --full signals every process of the job, and
    # SIGUSR1 ends a process that has no handler): it ignores it, the rank's handler hears it
    # the local cluster's nodes are names no resolver knows on one host: rank 0's agent must
    # give its workers an address, not its name
    local = [f"--local-addr={rdzv.host}"] if rdzv.host.startswith("127.") else []
    return [*step, "bash", "-c", 'trap "" USR1; exec "$@"', "torchrun", sys.executable, "-m",
            "railgang.demo.torch_elastic", "torchrun", *local, "--nproc-per-node=1", "--max-restarts=0", *rdzv.torchrun_args(lo, len(nodes)),
            *rank_argv]


def launch(args: argparse.Namespace) -> int:
    ctx = TrainingContext(report_every_s=5.0)
    # the batch step hears the notice too (scancel --full): it must outlive it; the ranks act
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the requeue
    rdzv = ctx.rendezvous()
    addr = _address(ctx, rdzv.host)
    rdzv = dataclasses.replace(rdzv, host=addr)  # the local cluster's node names do not resolve
    launcher = _launcher(args.launcher)
    state = args.dir / "state.json"
    while True:
        nodes = _nodes(ctx)
        env = {**os.environ, "MASTER_ADDR": addr, "MASTER_PORT": str(rdzv.port),
               # srun reads the allocation from these: after a shrink in place they are stale
               "SLURM_JOB_NODELIST": ",".join(nodes), "SLURM_NODELIST": ",".join(nodes),
               "SLURM_JOB_NUM_NODES": str(len(nodes)), "SLURM_NNODES": str(len(nodes))}
        if addr.startswith("127.") and "GLOO_SOCKET_IFNAME" not in env:
            env["GLOO_SOCKET_IFNAME"] = "lo"
        for key in ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_TASKS_PER_NODE"):
            env.pop(key, None)
        state.unlink(missing_ok=True)
        _log(args, f"launch nodes={len(nodes)} via={launcher} rdzv={rdzv.endpoint} "
                   f"restart={ctx.restart_count}")
        rc = subprocess.run(_ranks_argv(launcher, ctx, rdzv, nodes), env=env, check=False).returncode
        why = json.loads(state.read_text())["why"] if state.exists() else None
        if why == EXIT_DONE:
            return 0
        if why == EXIT_SHRINK:  # relaunch once Slurm has dropped the nodes
            deadline = time.time() + 300
            while time.time() < deadline and len(_nodes(ctx)) >= len(nodes):
                time.sleep(0.2)
            continue
        if why == EXIT_REQUEUE:
            _log(args, "waiting for the requeue")
            ctx.wait_for_requeue()
            return 0
        _log(args, f"ranks failed (srun exit {rc}); restarting from the checkpoint")
        time.sleep(1.0)


def reference(args: argparse.Namespace) -> int:
    """The same training without Slurm, unresized: ``--world`` local ranks."""
    argv = [a for a in sys.argv[1:] if a != "reference"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    procs = [subprocess.Popen([sys.executable, "-m", "railgang.demo.torch_elastic", "train", *argv],
                              env={**env, "RANK": str(r), "WORLD_SIZE": str(args.world),
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(args.port),
                                   "GLOO_SOCKET_IFNAME": "lo"})
             for r in range(args.world)]
    return max(p.wait() for p in procs)


def torchrun(argv: list[str]) -> int:
    """torchrun itself (``torch.distributed.run.main``), where torch was built without libuv
    (Debian trixie's 2.6) with its c10d store made without it: that torchrun asks TCPStore for
    libuv by default and fails at once ("use_libuv was requested but PyTorch was build without
    libuv support"). Elsewhere this is plain torchrun."""
    from datetime import timedelta

    import torch.distributed as dist
    from torch.distributed import run
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend as c10d

    try:
        dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
    except RuntimeError as exc:
        if "libuv" not in str(exc):
            raise
        # the rendezvous' store without libuv; the workers' store is their own (torch's opt-out
        # of sharing the agent's, which it would make with libuv), env:// reads USE_LIBUV
        c10d.TCPStore = functools.partial(dist.TCPStore, use_libuv=False)
        os.environ.update(USE_LIBUV="0", TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    run.main(argv)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["torchrun"]:
        return torchrun(argv[1:])
    args = _args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    return {"launch": launch, "train": train, "reference": reference}[args.mode](args)


__all__ = ["launch", "main", "reference", "torchrun", "train"]


if __name__ == "__main__":
    sys.exit(main())
