"""Points as the tasks of a Slurm job array: ``sbatch --array=0-N%P`` on the cluster ``SLURM_CONF``
(or Slurm's default) points at; task ``i`` runs the ``i``-th point of its batch file.

The sweep's directory must be on a file system the nodes share: a task reads its batch and plan
there and writes its result there, the same content-addressed file a local run writes. The nodes
must run the same railgang as the submitting host, at the same path: a result lists the source
files its replay loaded, checked against the submitting host's copy (a node with other code
gives results that are ``stale`` there, and rerun).

``python -m railgang.daemon.sim.sweep.run_slurm BATCH`` is the task's command.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from railgang.daemon.sim.sweep.plan import load_plan
from railgang.daemon.sim.sweep.run_local import run_point
from railgang.daemon.sim.sweep.store import Store, package_root, read_json, write_atomic
from railgang.errors import InputError, SlurmError

# Slurm's default MaxArraySize is 1001 (indices 0-1000): a longer batch becomes several arrays
MAX_ARRAY = 1000
_ACTIVE = "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED,REQUEUED,RESIZING"


def _batch(store: Store, plan_path: Path, keys: Sequence[str]) -> Path:
    data = {"plan": str(plan_path), "keys": list(keys)}
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    path = store.root / "batches" / f"{digest}.json"
    write_atomic(path, data)
    return path


def _slurm(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env,
                              check=False)
    except FileNotFoundError as exc:
        raise SlurmError(f"{argv[0]} not found: Slurm's client commands are needed for a sweep "
                         "on a cluster (or give --local N to run here)") from exc
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SlurmError(f"{argv[0]} failed: {exc}") from exc


def submit(store: Store, plan_path: Path, keys: Sequence[str], *, parallel: int,
           name: str, timeout_s: float | None, sbatch_args: Sequence[str]) -> list[str]:
    """Submit ``keys`` as job arrays of at most MAX_ARRAY tasks, ``parallel`` running at once
    each (``%P``); the array job ids."""
    env = dict(os.environ)  # sbatch exports it to the tasks: the same python, this railgang
    env["PYTHONPATH"] = os.pathsep.join(
        [str(package_root().parent), *filter(None, [env.get("PYTHONPATH")])])
    (store.root / "logs").mkdir(parents=True, exist_ok=True)
    ids = []
    for start in range(0, len(keys), MAX_ARRAY):
        chunk = keys[start:start + MAX_ARRAY]
        batch = _batch(store, plan_path, chunk)
        argv = ["sbatch", "--parsable", f"--array=0-{len(chunk) - 1}%{max(1, parallel)}",
                f"--job-name=sweep-{name}"[:64], f"--chdir={store.root}", "--cpus-per-task=1",
                f"--output={store.root / 'logs' / 'slurm-%A_%a.out'}"]
        if timeout_s:  # Slurm's limit in whole minutes, above the sweep's own kill
            argv.append(f"--time={math.ceil(timeout_s / 60) + 1}")
        argv += [*sbatch_args, "--wrap",
                 shlex.join([sys.executable, "-m", "railgang.daemon.sim.sweep.run_slurm",
                             str(batch)])]
        res = _slurm(argv, env)
        if res.returncode != 0:
            # job_submit plugins say why on a line of their own before Slurm's generic one
            lines = [ln.removeprefix("sbatch: error: ").strip()
                     for ln in (res.stderr or res.stdout).splitlines() if ln.strip()]
            why = "; ".join(lines)[:500] or f"exit status {res.returncode}"
            raise SlurmError(f"sbatch refused the array: {why}")
        ids.append(res.stdout.strip().split(";")[0])
    _remember(store, ids)
    return ids


def _arrays_path(store: Store) -> Path:
    return store.root / "arrays.json"


def _remember(store: Store, ids: Sequence[str]) -> None:
    """The arrays submitted into this directory (the last 100): a rerun waits for those still
    running instead of submitting their points a second time."""
    known = _known(store)
    write_atomic(_arrays_path(store), [*known, *ids][-100:])


def _known(store: Store) -> list[str]:
    path = _arrays_path(store)
    if not path.exists():
        return []
    try:
        data = read_json(path, "sweep arrays")
    except InputError:
        return []
    return [str(i) for i in data if str(i).isdigit()] if isinstance(data, list) else []


def running(store: Store) -> list[str]:
    """Arrays submitted into this directory earlier that still have tasks pending or running."""
    ids = _known(store)
    if not ids:
        return []
    res = _slurm(["squeue", "-h", "-r", "-j", ",".join(ids), "-t", _ACTIVE, "-o", "%i"])
    if res.returncode != 0:
        return []  # purged long ago ("Invalid job id"): none of them runs
    return sorted({ln.split("_")[0] for ln in res.stdout.split() if ln.split("_")[0] in ids})


def wait(ids: Sequence[str], *, poll_s: float = 2.0,
         on_tick: Callable[[int], None] | None = None) -> None:
    """Until no task of the arrays ``ids`` is pending or running (squeue); ``on_tick`` gets the
    number still active. A job squeue no longer knows (purged after MinJobAge) is finished."""
    failures = 0
    while True:
        res = _slurm(["squeue", "-h", "-r", "-j", ",".join(ids), "-t", _ACTIVE, "-o", "%i"])
        if res.returncode != 0 and "Invalid job id" not in res.stderr:
            failures += 1  # slurmctld busy or restarting: a few misses are not an answer
            if failures > 30:
                raise SlurmError(f"squeue failed: {res.stderr.strip()[:300]}")
            time.sleep(poll_s)
            continue
        failures = 0
        active = len([ln for ln in res.stdout.splitlines() if ln.strip()])
        if on_tick is not None:
            on_tick(active)
        if res.returncode != 0 or active == 0:
            return
        time.sleep(poll_s)


def task_main(argv: Sequence[str]) -> int:
    """One array task: the ``SLURM_ARRAY_TASK_ID``-th point of the batch ``argv[0]``."""
    try:
        if len(argv) != 1:
            raise InputError("usage: python -m railgang.daemon.sim.sweep.run_slurm BATCH")
        batch = read_json(Path(argv[0]), "sweep batch")
        index = int(os.environ.get("SLURM_ARRAY_TASK_ID", ""))
        key = batch["keys"][index]
        plan = load_plan(Path(batch["plan"]))
    except (InputError, ValueError, KeyError, IndexError, TypeError) as exc:
        print(f"sweep task: {exc}", file=sys.stderr)
        return 1
    point = next(p for p in plan.points if p.key == key)
    outcome = run_point(plan, point, Store(Path(batch["plan"]).parents[1]))
    if outcome.status == "failed":
        print(f"sweep task: point {point.index} failed: {outcome.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(task_main(sys.argv[1:]))


__all__ = ["MAX_ARRAY", "running", "submit", "task_main", "wait"]
