"""The ``railgang`` executable. A TAB (``_RAILGANG_COMPLETE`` set by the completion scripts)
is answered by ``complete.py`` before typer is imported, so completing costs a small fraction
of what a command costs; anything else is the command line (``cli.py``)."""

from __future__ import annotations

import os
import sys


def main() -> None:
    if os.environ.get("_RAILGANG_COMPLETE"):
        from railgang.daemon.cli.complete import run

        sys.exit(run(os.environ))
    from railgang.daemon.service import stop_signal

    if stop_signal.is_daemon_run(sys.argv[1:]):
        stop_signal.install_early()  # before the seconds of imports below (stop_signal.py)
    from railgang.daemon.cli.main import main as cli_main

    cli_main()


__all__ = ["main"]
