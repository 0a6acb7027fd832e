"""``railgang daemon run`` as a real process: one leader (file lock across processes, advisory
lock on PostgreSQL), standby take-over after ``kill -9``, ``/metrics`` over loopback, JSON logs,
``daemon status`` exit codes, clean SIGTERM, and ``explain`` after the daemon stopped."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import pytest

from railgang.daemon.service.leader import AdvisoryLock, FileLock, probe
from railgang.db.session import make_engine

RAILGANG = str(Path(sys.executable).with_name("railgang"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ,
            "RAILGANG_CONFIG": "",
            "RAILGANG_DB__URL": f"sqlite:///{tmp_path / 'rg.sqlite'}",
            "RAILGANG_SLURM__BACKEND": "sim",
            "RAILGANG_DEVCLUSTER__NODES": "4",
            "RAILGANG_DAEMON__DEMO_JOBS": "12",
            "RAILGANG_DAEMON__POLICY": "fifo",
            "RAILGANG_DAEMON__CYCLE_INTERVAL_S": "0.3",
            "RAILGANG_DAEMON__HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
            "RAILGANG_DAEMON__METRICS_PORT": str(free_port())}


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    logs: list[IO[str]] = []

    def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
        logs.append(open(tmp_path / f"daemon-{len(procs)}.log", "w"))  # noqa: SIM115
        p = subprocess.Popen([RAILGANG, "daemon", "run", "--log-format", "json", *args],
                             env=env, stdout=logs[-1], stderr=subprocess.STDOUT, text=True)
        procs.append(p)
        return p

    yield start
    for p in procs:  # only what this test started, by pid
        if p.poll() is None:
            p.kill()
            p.wait(10)
    for log in logs:
        log.close()


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([RAILGANG, *args], env=env, capture_output=True, text=True, timeout=60)


def status(env: dict[str, str]) -> tuple[int, dict[str, object]]:
    res = cli(env, "daemon", "status", "--json")
    return res.returncode, json.loads(res.stdout)


def test_file_lock_is_exclusive_across_processes_and_dies_with_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite.leader"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from railgang.daemon.service.leader import "
         f"FileLock; lock = FileLock(Path({str(path)!r})); print(lock.try_acquire(), flush=True);"
         " sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        mine = FileLock(path)
        assert not mine.try_acquire() and probe(FileLock(path))
        assert path.read_text().split()[0] == str(holder.pid)
        holder.send_signal(signal.SIGKILL)  # the kernel drops the flock with the process
        holder.wait(10)
        assert mine.try_acquire() and probe(FileLock(path)) is not False
        mine.release()
        assert not probe(FileLock(path))
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        for pipe in (holder.stdin, holder.stdout):
            if pipe is not None:
                pipe.close()


@pytest.mark.postgres
def test_advisory_lock_is_exclusive_between_sessions(postgres_url: str) -> None:
    e1, e2 = make_engine(postgres_url), make_engine(postgres_url)
    a, b = AdvisoryLock(e1), AdvisoryLock(e2)
    try:
        assert a.try_acquire() and a.try_acquire()  # re-entrant for the holder
        assert not b.try_acquire() and probe(AdvisoryLock(e2))
        a.release()
        assert b.try_acquire() and not AdvisoryLock(e1).try_acquire()
        b.release()
        assert not probe(AdvisoryLock(e1))
    finally:
        a.release()
        b.release()
        e1.dispose()
        e2.dispose()


def test_daemon_run_status_metrics_sigterm_and_explain(env: dict[str, str], tmp_path: Path,
                                                       spawn: Callable[..., subprocess.Popen[str]],
                                                       ) -> None:
    code, st = status(env)
    assert code == 4 and st["running"] is False  # nothing ran yet: exit 4, no traceback
    daemon = spawn(env)
    wait_for("three cycles", lambda: (status(env)[1].get("last_cycle") or {}).get("id", 0) >= 3)
    code, st = status(env)
    assert code == 0 and st["running"] is True
    assert st["leader"]["pid"] == daemon.pid and st["leader"]["backend"] == "sim"  # type: ignore[index]
    assert st["heartbeat"]["age_s"] is not None and st["heartbeat"]["age_s"] < 5  # type: ignore[index]
    assert st["journal"]["applied"] > 0  # type: ignore[index]

    text = cli(env, "daemon", "status")
    assert text.returncode == 0 and text.stdout.startswith("daemon: running\n")
    assert f"leader: pid {daemon.pid}" in text.stdout and "journal: planned 0, applied" in text.stdout

    port = env["RAILGANG_DAEMON__METRICS_PORT"]
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for name in ("railgang_cycle_phase_seconds_bucket{", 'phase="place"', 'phase="apply"',
                 "railgang_pending_jobs{reason=", "railgang_actions_total{kind=\"start\"",
                 'railgang_leaf_gpus{leaf="s1",state="allocated"}', "railgang_leader 1.0",
                 'railgang_cycles_total{result="ok"}'):
        assert name in body, name

    second = cli(env, "daemon", "run", "--no-wait")
    assert second.returncode == 4
    assert "another railgang daemon is the leader" in second.stderr
    assert f"pid {daemon.pid}" in second.stderr and "Traceback" not in second.stderr

    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(30) == 0
    lines = [json.loads(x) for x in (tmp_path / "daemon-0.log").read_text().splitlines()]
    cycles = [x for x in lines if "cycle" in x and "ms" in x]
    assert cycles and {"snapshot", "place", "total"} <= set(cycles[-1]["ms"])
    assert all({"ts", "level", "logger", "msg"} <= set(x) for x in lines)
    assert "stopped after" in lines[-1]["msg"]
    assert status(env)[0] == 4  # stopped: exit 4, last known leader still shown
    running = [json.loads(cli(env, "explain", f"demo-{i}", "--json").stdout or "{}")
               for i in range(1, 13)]
    assert any(e.get("state") == "running" and e.get("nodes") for e in running)
    text = cli(env, "explain", "no-such-job")
    assert text.returncode == 1 and text.stderr.count("\n") == 1
    assert "no-such-job: railgang has no record" in text.stderr


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_db_env(request: pytest.FixtureRequest, env: dict[str, str]) -> Iterator[dict[str, str]]:
    """``env`` on SQLite (file lock) and on PostgreSQL (advisory lock), emptied around."""
    if request.param == "sqlite":
        yield env
        return
    from alembic import command

    from railgang.db import migrate

    url = request.getfixturevalue("postgres_url")

    def empty() -> None:
        if migrate.current(url) is not None:
            command.downgrade(migrate.alembic_config(url), "base")

    empty()
    yield {**env, "RAILGANG_DB__URL": url}
    empty()


def test_standby_takes_over_after_the_leader_is_killed(any_db_env: dict[str, str],
                                                       spawn: Callable[..., subprocess.Popen[str]],
                                                       ) -> None:
    env = any_db_env
    first = spawn(env)
    wait_for("a first cycle", lambda: status(env)[1].get("last_cycle") is not None)
    standby = spawn({**env, "RAILGANG_DAEMON__METRICS_PORT": "0"})
    time.sleep(1.0)
    assert standby.poll() is None and status(env)[1]["leader"]["pid"] == first.pid  # type: ignore[index]
    first.send_signal(signal.SIGKILL)  # no cleanup at all: the lock must still pass on
    first.wait(10)
    wait_for("the standby to lead",
             lambda: (status(env)[1].get("leader") or {}).get("pid") == standby.pid)
    standby.send_signal(signal.SIGTERM)
    assert standby.wait(30) == 0


def test_a_busy_metrics_port_is_one_clear_line(env: dict[str, str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = cli({**env, "RAILGANG_DAEMON__METRICS_PORT": str(port)}, "daemon", "run")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"daemon.metrics_port: cannot serve /metrics on 127.0.0.1:{port}" in res.stderr
    assert status(env)[0] == 4  # it released the lock on the way out


def test_probing_a_file_lock_never_creates_it(tmp_path: Path) -> None:
    """`railgang daemon status` run as root before the daemon (its own user) started must not
    leave a root-owned lock file behind that the daemon then cannot open (quickstart, as root)."""
    path = tmp_path / "db.sqlite.leader"
    assert not probe(FileLock(path)) and not path.exists()
    path.write_text("")
    path.chmod(0o444)  # read-only to its owner too: a probe needs no write access
    assert not probe(FileLock(path))
