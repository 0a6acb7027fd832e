"""The heartbeat file job_submit.lua reads: ``EPOCH LEASE_S`` on one line.

While ``EPOCH`` is younger than ``RAILGANG_HEARTBEAT_MAX_AGE`` (60 s by default, set in
slurmctld's environment), job_submit.lua gives every new railgang job ``begin_time = now +
LEASE_S``. The daemon writes the file every cycle; when it stops writing, new jobs get no lease
and leased ones run natively once their lease ends. Writing is atomic (rename), so slurmctld
never reads half a line.
"""

from __future__ import annotations

import os
from pathlib import Path

from railgang.topology.files import InputProblem, read_bytes


def heartbeat_line(now: float, lease_s: int) -> str:
    return f"{int(now)} {int(lease_s)}\n"


def write_heartbeat(path: Path, now: float, lease_s: int) -> None:
    """Atomically write ``EPOCH LEASE_S`` to ``path`` (creating its directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(heartbeat_line(now, lease_s), encoding="ascii")
    tmp.chmod(0o644)  # slurmctld may run as SlurmUser, not as the daemon's user
    os.replace(tmp, path)


def read_heartbeat(path: Path) -> tuple[int, int | None] | None:
    """``(epoch, lease_s or None)`` from the file, or None when missing or unreadable."""
    try:  # bounded, regular files only: a FIFO or /dev/zero at the path must not hang a cycle
        parts = read_bytes(path, "heartbeat file", 4096).decode("ascii").split()
    except (InputProblem, UnicodeDecodeError):
        return None
    if not parts or not parts[0].isdigit():
        return None
    lease = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return int(parts[0]), lease


__all__ = ["heartbeat_line", "read_heartbeat", "write_heartbeat"]
