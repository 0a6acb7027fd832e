"""Running points: one point is one ``railgang sim ... --json`` process (here or in a Slurm array
task), ``--local N`` runs N of them at once on this machine.

A point runs in a process of its own, not in this one: its CPU time is that process's (from
``wait4``), a crash or an out-of-memory kill loses that point only, and it runs exactly the
command line a user could paste.
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from railgang.daemon.sim.sweep.plan import Plan, PlannedPoint, now_iso
from railgang.daemon.sim.sweep.store import (
    RESULT_FORMAT,
    Store,
    code_fingerprint,
    code_id,
    read_json,
)
from railgang.errors import InputError

# `railgang sim` in a fresh interpreter of this one (the same virtualenv, wherever it is); at
# exit it lists the railgang modules it loaded into $RAILGANG_SWEEP_MODULES (the point's code)
_MAIN = """
import atexit, json, os, sys
def _modules():
    names = sorted({m.__file__ for n, m in list(sys.modules.items())
                    if n.split(".")[0] == "railgang" and getattr(m, "__file__", None)})
    with open(os.environ["RAILGANG_SWEEP_MODULES"], "w") as fh:
        json.dump(names, fh)
atexit.register(_modules)
from railgang.daemon.cli.main import main
main()
"""
SIM_COMMAND: tuple[str, ...] = (sys.executable, "-c", _MAIN, "sim")


@dataclass(frozen=True)
class Outcome:
    index: int
    key: str
    status: str  # "reused" (a result was there), "done" (computed now) or "failed"
    wall_s: float = 0.0
    cpu_s: float = 0.0
    error: str = ""


def _last_line(log: Path) -> str:
    try:
        with log.open("rb") as fh:
            fh.seek(max(0, log.stat().st_size - 4096))
            lines = [ln for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:500] if lines else ""


def _wait(proc: subprocess.Popen[bytes], timeout_s: float | None) -> tuple[int, float, bool]:
    """Exit code, CPU seconds of the child (user + system, from wait4) and whether it was killed
    for running past ``timeout_s``."""
    expired = threading.Event()

    def kill() -> None:
        expired.set()
        proc.send_signal(signal.SIGKILL)

    timer = threading.Timer(timeout_s, kill) if timeout_s else None
    if timer is not None:
        timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        if timer is not None:
            timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    return proc.returncode, usage.ru_utime + usage.ru_stime, expired.is_set()


def run_point(plan: Plan, point: PlannedPoint, store: Store) -> Outcome:
    """Compute ``point`` unless its result is there; record the result or the failure."""
    if store.result(point.key) is not None:
        return Outcome(point.index, point.key, "reused")
    out = store.root / "tmp" / f"{point.key}.{os.getpid()}.{threading.get_ident()}.json"
    log = store.log_path(point.key)
    out.parent.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    started, t0 = now_iso(), time.monotonic()
    modules = out.with_suffix(".modules")
    env = {**os.environ, "RAILGANG_SWEEP_MODULES": str(modules)}
    with out.open("wb") as stdout, log.open("wb") as stderr:
        proc = subprocess.Popen([*SIM_COMMAND, *point.argv, "--json", "--quiet"], env=env,
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        rc, cpu, timed_out = _wait(proc, plan.timeout_s)
    wall = time.monotonic() - t0
    error = (f"killed after the sweep's timeout_s = {plan.timeout_s:g} s" if timed_out
             else "" if rc == 0 else _last_line(log) or f"exit status {rc}")
    result: Any = None
    loaded: Any = None
    if not error:
        try:
            result = read_json(out, "the point's sim --json output")
            loaded = read_json(modules, "the point's module list")
        except InputError as exc:
            error = str(exc)
    out.unlink(missing_ok=True)
    modules.unlink(missing_ok=True)
    code = code_fingerprint([str(f) for f in loaded] if isinstance(loaded, list) else [],
                            store.code_root)
    if not error and not code:
        error = "the point's process listed no railgang module it loaded"
    if error:
        store.save_failure(point.key, {"key": point.key, "index": point.index, "rc": rc,
                                       "error": error, "log": str(log), "at": now_iso(),
                                       "host": platform.node()})
        return Outcome(point.index, point.key, "failed", wall, cpu, error)
    store.save_result(point.key, {
        "format": RESULT_FORMAT, "key": point.key, "labels": point.labels,
        "options": point.options, "inputs": point.inputs, "argv": point.argv,
        "code": code_id(code), "code_files": code, "git": plan.git,
        "python": platform.python_version(),
        "host": platform.node(), "started": started, "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3), "result": result})
    return Outcome(point.index, point.key, "done", wall, cpu)


def run_local(plan: Plan, store: Store, workers: int, indices: Sequence[int],
              on_done: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Run the points ``indices`` of ``plan``, ``workers`` processes at a time (threads wait on
    them; the replays themselves run in their own processes)."""
    todo = [plan.points[i] for i in indices]
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max(1, workers), thread_name_prefix="sweep") as pool:
        try:
            for future in as_completed([pool.submit(run_point, plan, p, store) for p in todo]):
                outcome = future.result()
                outcomes.append(outcome)
                if on_done is not None:
                    on_done(outcome)
        except BaseException:  # Ctrl-C: start no more points (the running ones got SIGINT too)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return sorted(outcomes, key=lambda o: o.index)


__all__ = ["SIM_COMMAND", "Outcome", "run_local", "run_point"]
