"""The job processes a test cluster leaves behind when it stops: each job's ``slurmstepd`` and
everything under it.

slurmstepd detaches from the slurmd that started it, so stopping the recorded daemons (slurmd
first) leaves every running job's slurmstepd and its processes alive, holding their emulated
GPUs and the cluster's directories. They are found by what they are, not by name: a process
whose executable is a slurmstepd (Debian 13+: ``slurmstepd-wlm``) and whose environment names
this cluster's slurm.conf (``SLURM_CONF``, which slurmd passes on), plus its descendants. From
24.11 on, slurmstepd writes its title over its environment (``/proc/PID/environ`` reads empty),
so a slurmstepd with no ``SLURM_CONF`` there is this cluster's when it holds a file of the
cluster's directory open (its slurmd's log, ``DIR/log``; the directory above ``etc/slurm.conf``).
Other clusters' jobs on the same host name other files and are left alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[str, int] | None:
    """(executable basename, parent pid) of ``pid``; None once it is gone or unreadable."""
    try:
        exe = os.path.basename(os.readlink(PROC / str(pid) / "exe"))
        ppid = int((PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return exe, ppid


def _conf_of(pid: int) -> str | None:
    """The ``SLURM_CONF`` of ``pid``'s environment; None when it has none."""
    try:
        env = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return ""
    for item in env.split(b"\0"):
        if item.startswith(b"SLURM_CONF="):
            return item[len(b"SLURM_CONF="):].decode("utf-8", "replace")
    return None


def _holds_file_under(pid: int, home: str) -> bool:
    fds = PROC / str(pid) / "fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for name in names:
        with contextlib.suppress(OSError):
            if os.readlink(fds / name).startswith(home + "/"):
                return True
    return False


def _of_cluster(pid: int, slurm_conf: Path) -> bool:
    conf = _conf_of(pid)
    if conf is not None:
        return conf == str(slurm_conf)
    return _holds_file_under(pid, str(slurm_conf.parent.parent))


def stepd_trees(slurm_conf: Path) -> list[int]:
    """PIDs of this cluster's slurmstepds and of every process under them, leaves first."""
    procs = {int(p.name): st for p in PROC.iterdir() if p.name.isdigit()
             if (st := _stat(int(p.name))) is not None}
    roots = [pid for pid, (exe, _) in procs.items()
             if exe.startswith("slurmstepd") and _of_cluster(pid, slurm_conf)]
    children: dict[int, list[int]] = {}
    for pid, (_, ppid) in procs.items():
        children.setdefault(ppid, []).append(pid)
    order: list[int] = []
    stack = list(roots)
    while stack:
        pid = stack.pop()
        order.append(pid)
        stack.extend(children.get(pid, []))
    me = os.getpid()
    return [pid for pid in reversed(order) if pid != me]


def kill_stepd_trees(slurm_conf: Path) -> int:
    """SIGKILL this cluster's job processes and their slurmstepds; returns how many."""
    pids = stepd_trees(slurm_conf)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


__all__ = ["kill_stepd_trees", "stepd_trees"]
