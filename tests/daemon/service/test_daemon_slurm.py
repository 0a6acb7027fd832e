"""``railgang daemon run --once`` against the real local Slurm 22.05 cluster (CLI backend):
a hinted multi-node job submitted under the begin-time lease is placed inside one leaf, the
journal says so, and ``explain`` shows where and why."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from railgang.daemon.slurm.cli import write_heartbeat
from railgang.devcluster.cluster import DevCluster, slurm_env
from railgang.devcluster.layout import ClusterSpec

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
RAILGANG = str(Path(sys.executable).with_name("railgang"))


def _squeue(cluster: DevCluster, job: str) -> dict[str, str]:
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T|%N|%r"], capture_output=True,
                         text=True, env=slurm_env(cluster.spec), timeout=60, check=True).stdout
    state, nodes, reason = [*out.strip().split("|"), "", "", ""][:3]
    return {"state": state, "nodes": nodes, "reason": reason}


def _submit_leased_gang(spec: ClusterSpec, tmp_path: Path) -> str:
    """A fresh heartbeat (so job_submit.lua leases new ML jobs), then a hinted 2-node gang that
    sleeps 300 s; returns its job id."""
    write_heartbeat(spec.heartbeat_file, time.time(), 600)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nsleep 300\n")
    script.chmod(0o755)
    return subprocess.run(
        ["sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null", "--account=team-a",
         "-N2", "--gres=gpu:8", "--comment=rg:parallel=tp8,dp2;class=1", str(script)],
        capture_output=True, text=True, env=slurm_env(spec), timeout=60, check=True,
    ).stdout.strip().split(";")[0]


def _daemon_env(spec: ClusterSpec, tmp_path: Path, **extra: str) -> dict[str, str]:
    """`railgang daemon run` on this cluster: CLI backend, FIFO, its own SQLite, no metrics."""
    return {**os.environ, **slurm_env(spec), "RAILGANG_CONFIG": "",
            "RAILGANG_DB__URL": f"sqlite:///{tmp_path / 'rg.sqlite'}",
            "RAILGANG_SLURM__BACKEND": "cli", "RAILGANG_SLURM__CONF": str(spec.slurm_conf),
            "RAILGANG_DAEMON__HEARTBEAT_FILE": str(spec.heartbeat_file),
            "RAILGANG_DAEMON__METRICS_PORT": "0", "RAILGANG_DAEMON__POLICY": "fifo", **extra}


def test_daemon_once_places_a_hinted_job_on_the_real_cluster(slurm_cluster: DevCluster,
                                                             tmp_path: Path) -> None:
    spec = slurm_cluster.spec
    job = _submit_leased_gang(spec, tmp_path)
    env = _daemon_env(spec, tmp_path)
    try:
        deadline = time.monotonic() + 30
        while _squeue(slurm_cluster, job)["reason"] != "BeginTime":  # held by the lease
            assert time.monotonic() < deadline, _squeue(slurm_cluster, job)
            time.sleep(0.5)
        run = subprocess.run([RAILGANG, "daemon", "run", "--once", "--log-format", "json"],
                             env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        cycle = next(json.loads(x) for x in run.stderr.splitlines() if '"cycle"' in x
                     and '"ms"' in x)
        assert cycle["actions"].get("Start", 0) >= 1 and cycle["failed"] == 0, cycle
        deadline = time.monotonic() + 60
        while (q := _squeue(slurm_cluster, job))["state"] != "RUNNING":
            assert time.monotonic() < deadline, q
            time.sleep(0.5)
        placed = json.loads(subprocess.run([RAILGANG, "explain", job, "--json"], env=env,
                                           capture_output=True, text=True, timeout=60).stdout)
        assert placed["state"] == "running" and placed["how"] == "started"
        assert len(placed["leaves"]) == 1 and placed["rail_aligned"] is True  # one leaf
        assert placed["nodes"] == q["nodes"]  # where Slurm runs it is where railgang put it
        beat = spec.heartbeat_file.read_text().split()
        assert abs(int(beat[0]) - time.time()) < 60
        status = json.loads(subprocess.run([RAILGANG, "daemon", "status", "--json"], env=env,
                                           capture_output=True, text=True, timeout=60).stdout)
        assert status["journal"]["applied"] >= 1 and status["journal"]["planned"] == 0
        # the fleet's inventory for the report: every node sinfo lists, busy or idle
        # closing(): sqlite3's own context manager commits but never closes (Python 3.13+
        # warn when the connection is collected, which failed a later test on 24.11/26.05)
        with closing(sqlite3.connect(tmp_path / "rg.sqlite")) as con:
            nodes = dict(con.execute("SELECT node, gpus FROM node_states"))
        assert len(nodes) == spec.nodes and set(nodes.values()) == {spec.gpus_per_node}
    finally:
        subprocess.run(["scancel", job], env=slurm_env(spec), timeout=60, check=False)
        spec.heartbeat_file.unlink(missing_ok=True)


def _states(cluster: DevCluster, jobs: list[str]) -> dict[str, str]:
    out = subprocess.run(["squeue", "-h", "-t", "all", "-j", ",".join(jobs), "-o", "%i %T"],
                         capture_output=True, text=True, env=slurm_env(cluster.spec), timeout=60,
                         check=True).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


KILLS = 20


def _beat(path: Path) -> tuple[int, int] | None:
    """Which heartbeat file is there (each cycle replaces it: a new inode and time)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def test_kill_9_mid_cycle_neither_repeats_nor_loses_an_action(slurm_cluster: DevCluster,
                                                               tmp_path: Path) -> None:
    """Twenty `kill -9`s, at random moments, of a daemon cycling every 0.3 s while 10 hinted jobs
    wait and run (issue 7: 20 randomized kills with restarts): every
    job is started exactly once (a repeated Start would be refused by Slurm and journaled
    failed, or appear as a second applied start) and every job finishes."""
    import random

    spec = slurm_cluster.spec
    write_heartbeat(spec.heartbeat_file, time.time(), 600)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nsleep $1\n")
    script.chmod(0o755)
    rng = random.Random(7)
    jobs = []
    for _ in range(10):
        nodes = rng.choice((1, 2))
        jobs.append(subprocess.run(
            ["sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null",
             "--account=team-a", f"-N{nodes}", "--gres=gpu:8",
             f"--comment=rg:parallel=tp8,dp{nodes};class={rng.choice((1, 2, 3))}", str(script),
             str(rng.randint(3, 12))],
            capture_output=True, text=True, env=slurm_env(spec), timeout=60, check=True,
        ).stdout.strip().split(";")[0])
    env = _daemon_env(spec, tmp_path, RAILGANG_DAEMON__CYCLE_INTERVAL_S="0.3")
    daemon: subprocess.Popen[str] | None = None
    try:
        kills = 0
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline:
            beat = _beat(spec.heartbeat_file)
            daemon = subprocess.Popen([RAILGANG, "daemon", "run", "--log-format", "json"],
                                      env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, text=True)
            # start-up (imports, migrations) takes 1-7 s by the machine's load and a kill there
            # tests nothing: wait for the first cycle's heartbeat, then kill at a random moment
            # of the next cycles (0.3 s each). A fixed 1.5-4 s after spawn killed CI's daemons
            # before any had migrated its database (a loaded machine: the jobs never ran).
            while _beat(spec.heartbeat_file) == beat and daemon.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            if kills == KILLS:
                break  # this one runs the jobs to the end
            time.sleep(rng.uniform(0.0, 1.0))
            daemon.kill()  # SIGKILL: no cleanup, the journal is whatever was committed
            daemon.wait(10)
            kills += 1
        assert kills == KILLS
        while time.monotonic() < deadline:
            states = _states(slurm_cluster, jobs)
            if all(states.get(j) == "COMPLETED" for j in jobs):
                break
            time.sleep(1)
        assert all(s == "COMPLETED" for s in _states(slurm_cluster, jobs).values()), \
            _states(slurm_cluster, jobs)
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(15)
            assert daemon.wait(30) == 0
        from sqlalchemy import select
        from sqlalchemy.orm import Session

        from railgang.db.models import JournalEntry
        from railgang.db.session import make_engine

        engine = make_engine(env["RAILGANG_DB__URL"])
        with Session(engine) as s:
            starts = [(e.job_id, e.state, e.detail) for e in s.scalars(
                select(JournalEntry).where(JournalEntry.kind == "start"))]
            planned = s.scalars(select(JournalEntry).where(JournalEntry.state == "planned")).all()
        engine.dispose()
        applied = [j for j, state, _ in starts if state == "applied"]
        assert sorted(applied) == sorted(jobs), starts  # each job started once, none lost
        assert [x for x in starts if x[1] == "failed"] == []
        assert planned == []
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)
        subprocess.run(["scancel", *jobs], env=slurm_env(spec), timeout=60, check=False)
        spec.heartbeat_file.unlink(missing_ok=True)


SCONTROL_DOUBLE = """#!/bin/bash
# Test double first in PATH: the real scontrol, and a kill -9 of the daemon (our parent) at the
# moment a batch of Starts is sent ("before": not sent; "after": Slurm accepted it) when
# $RG_CRASH_FILE names the moment. It fires once.
REAL=/usr/bin/scontrol
if [ $# -eq 0 ] && [ -f "$RG_CRASH_FILE" ]; then
    script=$(cat)
    if grep -q ReqNodeList <<<"$script"; then
        mode=$(cat "$RG_CRASH_FILE"); rm -f "$RG_CRASH_FILE"
        if [ "$mode" = before ]; then kill -9 $PPID; exit 1; fi
        printf '%s\\n' "$script" | $REAL; rc=$?
        kill -9 $PPID; exit $rc
    fi
    printf '%s\\n' "$script" | exec $REAL
fi
exec $REAL "$@"
"""


@pytest.mark.parametrize("moment", ["before", "after"])
def test_kill_9_between_planned_and_applied_on_the_real_cluster(slurm_cluster: DevCluster,
                                                                tmp_path: Path,
                                                                moment: str) -> None:
    """The daemon process is killed (SIGKILL) exactly while its Starts are being sent: before
    Slurm got them, or after Slurm accepted them but before the outcome was journaled. The
    restarted daemon settles the open entries from Slurm: the job is started exactly once."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from railgang.db.models import JournalEntry
    from railgang.db.session import make_engine

    spec = slurm_cluster.spec
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "scontrol").write_text(SCONTROL_DOUBLE)
    (bindir / "scontrol").chmod(0o755)
    crash = tmp_path / "crash"
    job = _submit_leased_gang(spec, tmp_path)
    env = _daemon_env(spec, tmp_path, PATH=f"{bindir}:{os.environ['PATH']}",
                      RG_CRASH_FILE=str(crash), RAILGANG_DAEMON__CYCLE_INTERVAL_S="0.5")
    url = env["RAILGANG_DB__URL"]

    def journal() -> list[tuple[str | None, str, str]]:
        engine = make_engine(url)
        with Session(engine) as s:
            rows = [(e.job_id, e.state, e.detail) for e in s.scalars(
                select(JournalEntry).where(JournalEntry.kind == "start", JournalEntry.job_id == job)
                .order_by(JournalEntry.id))]
        engine.dispose()
        return rows

    try:
        deadline = time.monotonic() + 30
        while _squeue(slurm_cluster, job)["reason"] != "BeginTime":
            assert time.monotonic() < deadline, _squeue(slurm_cluster, job)
            time.sleep(0.5)
        crash.write_text(moment)
        killed = subprocess.run([RAILGANG, "daemon", "run", "--log-format", "json"], env=env,
                                capture_output=True, text=True, timeout=120)
        assert killed.returncode == -9, killed.stderr[-2000:]
        assert not crash.exists()
        assert journal() == [(job, "planned", "")]  # committed before it was sent
        if moment == "after":  # Slurm took the Start: the job runs on its next scheduling pass
            deadline = time.monotonic() + 60
            while (q := _squeue(slurm_cluster, job))["state"] != "RUNNING":
                assert time.monotonic() < deadline, q
                time.sleep(0.5)
        else:
            time.sleep(1.0)
            assert _squeue(slurm_cluster, job)["state"] == "PENDING"

        again = subprocess.run([RAILGANG, "daemon", "run", "--once", "--log-format", "json"],
                               env=env, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr[-2000:]
        rows = journal()
        if moment == "after":  # applied by Slurm: settled as applied, not sent again
            assert [(s, d.split(":")[0]) for _, s, d in rows] == [("applied", "reconciled")]
        else:  # never sent: abandoned, and the new cycle starts it (not lost)
            assert [s for _, s, _ in rows] == ["abandoned", "applied"]
        deadline = time.monotonic() + 60
        while (q := _squeue(slurm_cluster, job))["state"] != "RUNNING":
            assert time.monotonic() < deadline, q
            time.sleep(0.5)
    finally:
        subprocess.run(["scancel", job], env=slurm_env(spec), timeout=60, check=False)
        spec.heartbeat_file.unlink(missing_ok=True)
