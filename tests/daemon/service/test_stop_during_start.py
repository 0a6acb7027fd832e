"""A SIGTERM while ``railgang daemon run`` is still importing ends it with exit 0, not 143.

Found by CI's kill -9 test: its last daemon gets SIGTERM 1.5-4 s after it was spawned, and on a
loaded machine the imports before ``run_daemon`` took longer than that (exit -15).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

RAILGANG = str(Path(sys.executable).with_name("railgang"))


def test_a_sigterm_during_the_imports_is_remembered_not_fatal() -> None:
    # the command's module is replaced by one that is "still importing" when the signal lands
    code = (
        "import os, signal, sys\n"
        "sys.argv = ['railgang', '--log-format', 'json', 'daemon', 'run']\n"
        "import railgang.daemon.cli.main as cli\n"
        "def importing():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    from railgang.daemon.service.stop_signal import REQUESTED\n"
        "    print('remembered' if REQUESTED.is_set() else 'lost')\n"
        "cli.main = importing\n"
        "from railgang.daemon.cli.entry import main\n"
        "main()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "remembered"


def test_other_commands_keep_the_default_sigterm() -> None:
    from railgang.daemon.service.stop_signal import is_daemon_run

    assert is_daemon_run(["daemon", "run"]) and is_daemon_run(["--config", "f", "daemon", "run"])
    assert not is_daemon_run(["daemon", "status"]) and not is_daemon_run(["explain", "run"])


def _catches_sigterm(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(int(line.split()[1], 16) for line in status.splitlines()
                if line.startswith("SigCgt:"))
    return bool(mask & (1 << (signal.SIGTERM - 1)))


def test_daemon_run_stopped_while_starting_exits_0(tmp_path: Path) -> None:
    env = {**os.environ, "RAILGANG_HOME": str(tmp_path),
           "RAILGANG_DB__URL": f"sqlite:///{tmp_path / 'railgang.sqlite'}"}
    env.pop("RAILGANG_CONFIG", None)
    daemon = subprocess.Popen([RAILGANG, "daemon", "run"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _catches_sigterm(daemon.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        daemon.send_signal(signal.SIGTERM)  # at once: the imports take seconds more
        _, err = daemon.communicate(timeout=120)
        assert daemon.returncode == 0, err[-2000:]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)
