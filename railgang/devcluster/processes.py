"""Start daemons in the background and stop exactly those again, by recorded PID.

A PID file alone is not proof: after a reboot the number may belong to someone else. Each record
also holds the process start time from /proc, and ``stop`` only signals a PID whose start time
still matches — so ``down`` never touches a process ``up`` did not start.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from railgang.errors import DevClusterError

# Popen objects of daemons started by this process. Kept so they are not garbage-collected while
# running (Popen.__del__ warns) and so a long-lived parent (pytest) can reap them on stop.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    start_ticks: int
    argv: tuple[str, ...]


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks), or None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may contain spaces and parentheses: split after the last ')'
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_running(rec: ProcessRecord) -> bool:
    return _start_ticks(rec.pid) == rec.start_ticks


class ProcessTable:
    """The PID records of one cluster directory (one JSON file per process)."""

    def __init__(self, pid_dir: Path) -> None:
        self.pid_dir = pid_dir

    def records(self) -> list[ProcessRecord]:
        out = []
        for path in sorted(self.pid_dir.glob("*.json")):
            try:
                data = json.loads(path.read_text())
                out.append(ProcessRecord(data["name"], int(data["pid"]), int(data["start_ticks"]),
                                         tuple(data["argv"])))
            except (OSError, ValueError, KeyError):
                path.unlink(missing_ok=True)  # unreadable record: nothing we can safely signal
        return out

    def get(self, name: str) -> ProcessRecord | None:
        return next((r for r in self.records() if r.name == name), None)

    def _path(self, name: str) -> Path:
        return self.pid_dir / f"{name.replace(' ', '_')}.json"

    def start(self, name: str, argv: Sequence[str], *, log: Path,
              env: Mapping[str, str] | None = None) -> ProcessRecord:
        """Start ``argv`` in its own session, output to ``log``; record it."""
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            try:
                proc = subprocess.Popen(  # argument list, never a shell
                    list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True, env=dict(env) if env is not None else None,
                )
            except OSError as exc:
                raise DevClusterError(f"cannot start {name} ({argv[0]}): {exc}") from exc
        _CHILDREN[proc.pid] = proc
        ticks = None
        for _ in range(50):
            ticks = _start_ticks(proc.pid)
            if ticks is not None:
                break
            time.sleep(0.01)
        if ticks is None:
            raise DevClusterError(f"{name} exited at once; see {log}")
        rec = ProcessRecord(name, proc.pid, ticks, tuple(argv))
        self._path(name).write_text(json.dumps(rec.__dict__))
        return rec

    def stop(self, rec: ProcessRecord, *, timeout_s: float = 10.0) -> None:
        """SIGTERM, wait, then SIGKILL — only if the PID is still the process we started."""
        if is_running(rec):
            with contextlib.suppress(ProcessLookupError):
                os.kill(rec.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while is_running(rec) and time.monotonic() < deadline:
                _reap(rec.pid)
                time.sleep(0.05)
            if is_running(rec):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(rec.pid, signal.SIGKILL)
                while is_running(rec):
                    time.sleep(0.05)
            _reap(rec.pid)
        self._path(rec.name).unlink(missing_ok=True)


def _reap(pid: int) -> None:
    # our own children (when started from a long-lived process such as pytest) must be waited for
    proc = _CHILDREN.get(pid)
    if proc is not None and proc.poll() is not None:
        del _CHILDREN[pid]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _last_error(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    fatal = [ln for ln in lines if "fatal" in ln.lower() or "error" in ln.lower()]
    return f": {(fatal or lines or [''])[-1].strip()}"


def wait_for_port(port: int, *, timeout_s: float, what: str, log: Path | None = None,
                  rec: ProcessRecord | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if rec is not None and not is_running(rec):
            raise DevClusterError(f"{what} exited during start-up{_last_error(log)} (log: {log})")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    hint = f"; see {log}" if log else ""
    raise DevClusterError(f"{what} did not open port {port} within {timeout_s:.0f} s{hint}")


def wait_for_path(path: Path, *, timeout_s: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return
        time.sleep(0.05)
    hint = f"; see {log}" if log else ""
    raise DevClusterError(f"{what} did not create {path} within {timeout_s:.0f} s{hint}")


__all__ = ["ProcessRecord", "ProcessTable", "is_running", "port_in_use", "wait_for_port"]
