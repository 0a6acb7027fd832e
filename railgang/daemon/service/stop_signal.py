"""SIGTERM and SIGINT for ``railgang daemon run`` from the process's first instruction.

Importing the daemon takes seconds on a loaded machine (1.5-5 s measured on two busy cores), and
until ``run_daemon`` installs its handlers a SIGTERM kills the process outright (exit 143):
systemd stopping a daemon that is still starting, or a supervisor restarting it, would then see
a failure. ``entry.py`` installs this handler before any heavy import; it only remembers the
request (standard library only, nothing to tear down), and ``run_daemon`` reads it when it takes
the signals over, so a stop asked for during start-up ends the daemon with exit 0 before it
leads or cycles.
"""

from __future__ import annotations

import itertools
import signal
import threading
from collections.abc import Sequence
from types import FrameType

REQUESTED = threading.Event()
"""Set by a SIGTERM/SIGINT that arrived before ``run_daemon`` took the signals over."""


def _remember(_signum: int, _frame: FrameType | None) -> None:
    REQUESTED.set()


def is_daemon_run(argv: Sequence[str]) -> bool:
    """Whether the command line is ``railgang [global options] daemon run …``."""
    return any(a == "daemon" and b == "run" for a, b in itertools.pairwise(argv))


def install_early() -> None:
    """Remember a stop until the daemon installs its own handlers (main thread only)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _remember)
        signal.signal(signal.SIGINT, _remember)


__all__ = ["REQUESTED", "install_early", "is_daemon_run"]
