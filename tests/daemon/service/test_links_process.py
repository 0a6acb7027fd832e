"""``railgang daemon run`` with ``daemon.links`` on, as a real process: its collector thread reads
the fake fabric's sysfs trees, quarantines a lame port after the hysteresis, shows it in
``railgang topology links`` and ``/metrics``, and releases it after the repair."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from railgang.topology.fabric import fabric_from_shape
from railgang.topology.fakefabric import FakeIBFabric
from tests.daemon.service.test_process import free_port

RAILGANG = str(Path(sys.executable).with_name("railgang"))


class Ticking:
    """Steps the fake fabric (0.1 s of counters) every 0.1 s on a thread, faster than the
    collector's 0.3 s rounds, so every interval it judges saw the injected errors."""

    def __init__(self, fake: FakeIBFabric) -> None:
        self.fake, self.lock, self.stop = fake, threading.Lock(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            with self.lock:
                self.fake.step(0.1)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def _until(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow  # a daemon process, its start-up and a few dozen collection rounds
def test_daemon_collects_quarantines_and_releases(tmp_path: Path) -> None:
    fake = FakeIBFabric(tmp_path / "ib", fabric_from_shape(4, 8, 4))  # the sim demo's shape
    state = tmp_path / "links.json"
    port = free_port()
    env = {**os.environ, "RAILGANG_CONFIG": "",
           "RAILGANG_DB__URL": f"sqlite:///{tmp_path / 'rg.sqlite'}",
           "RAILGANG_SLURM__BACKEND": "sim", "RAILGANG_DEVCLUSTER__NODES": "4",
           "RAILGANG_DAEMON__DEMO_JOBS": "4", "RAILGANG_DAEMON__POLICY": "fifo",
           "RAILGANG_DAEMON__CYCLE_INTERVAL_S": "0.3",
           "RAILGANG_DAEMON__HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
           "RAILGANG_DAEMON__METRICS_PORT": str(port),
           "RAILGANG_LEDGER__GRANTS_FILE": str(tmp_path / "grants.txt"),
           "RAILGANG_DAEMON__LINKS__ENABLED": "true",
           "RAILGANG_DAEMON__LINKS__SYSFS_ROOT": str(tmp_path / "ib"),
           "RAILGANG_DAEMON__LINKS__INTERVAL_S": "0.3",
           "RAILGANG_DAEMON__LINKS__QUARANTINE_AFTER": "2",
           "RAILGANG_DAEMON__LINKS__WINDOW": "3",
           "RAILGANG_DAEMON__LINKS__RELEASE_AFTER": "3",
           "RAILGANG_DAEMON__LINKS__STATE_FILE": str(state)}
    with open(tmp_path / "daemon.log", "w") as log:
        proc = subprocess.Popen([RAILGANG, "daemon", "run"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, text=True)
        ticking = Ticking(fake)
        try:
            def quarantined() -> list[str]:
                try:
                    return [e["node"] for e in json.loads(state.read_text())["quarantine"]]
                except (OSError, ValueError):  # not written yet
                    return []

            def metric(name: str) -> float | None:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    for line in r.read().decode().splitlines():
                        if line.startswith(name + " "):
                            return float(line.split()[1])
                return None

            _until("a first round", state.is_file)
            with ticking.lock:
                fake.inject("n02", 5, symbol_error=50)
            _until("n02 quarantined", lambda: quarantined() == ["n02"])
            _until("the metric", lambda: metric("railgang_link_quarantined_nodes") == 1.0)
            shown = subprocess.run([RAILGANG, "topology", "links", "--state", str(state)], env=env,
                                   capture_output=True, text=True, timeout=60)
            assert "n02 mlx5_5 port 1: lame" in shown.stdout and "QUARANTINED" in shown.stdout
            with ticking.lock:
                fake.repair("n02", 5)
            _until("n02 released", lambda: quarantined() == [])
            assert proc.poll() is None
        finally:
            ticking.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    text = (tmp_path / "daemon.log").read_text()
    assert "link n02 mlx5_5 port 1 quarantined" in text and "released" in text
