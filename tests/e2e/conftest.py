"""End-to-end pieces: the real ``railgang daemon run`` process against the session's real Slurm
cluster, and black-box helpers that see only what a user sees (sbatch, squeue, scontrol, sacct).

The ``slurm_cluster`` fixture is shared with every other Slurm test of the session, so each test
leaves it as it found it: the daemon is stopped by its PID (SIGTERM, then SIGKILL), every job the
test submitted is cancelled and gone from the nodes, and the heartbeat file is removed (a fresh
one would lease the next test's jobs without a daemon to place them).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import hostlist
import pytest

from railgang.devcluster.cluster import DevCluster, slurm_env

RAILGANG = str(Path(sys.executable).with_name("railgang"))
TEST_ROOT = Path(os.environ.get("RAILGANG_TEST_ROOT", f"/tmp/railgang-pytest-{os.getuid()}"))
CYCLE_S = 1.0  # daemon.cycle_interval_s
LEASE_S = 20  # slurm.lease_s: job_submit.lua's begin-time lease while the daemon is alive
# a job whose lease ran out starts on one of Slurm's own later scheduling passes (sched/backfill
# every 30 s; the notes saw 22 s): the bound on "plain Slurm takes over"
SCHEDULING_PASS_S = 60

EXAMPLE = """#!/bin/bash
# every (re)start leaves one line: restart count, node count, nodes; then the example trainer
echo "run ${{SLURM_RESTART_COUNT:-0}} $SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST"
exec {python} -m railgang.demo.train_example --checkpoint-dir {dir} "$@"
"""
SLEEP = "#!/bin/bash\nsleep $1\n"


@dataclass(frozen=True)
class Run:
    """One sacct record: one run of a job (a requeued job has one per run; -D)."""

    job_id: str
    state: str
    start: float | None
    end: float | None
    nodes: tuple[str, ...]
    gpus: int


def _epoch(text: str) -> float | None:
    return None if text in ("", "Unknown", "None") else datetime.fromisoformat(text).timestamp()


@dataclass
class Cluster:
    """The user's view of the shared cluster; remembers every job this test submitted."""

    cluster: DevCluster
    dir: Path
    jobs: list[str] = field(default_factory=list)

    def sl(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True,
                              env=slurm_env(self.cluster.spec), timeout=60, check=check)

    def sbatch(self, *opts: str, script: str = SLEEP, args: tuple[str, ...] = ()) -> str:
        """Submit ``script`` (a sleep by default) with ``opts``; returns the job id."""
        path = self.dir / f"job{len(self.jobs)}.sh"
        path.write_text(script.format(python=sys.executable, dir=self.dir))
        path.chmod(0o755)
        res = self.sl("sbatch", "--parsable", f"--chdir={self.dir}", "--account=team-a",
                      "--open-mode=append", f"--output={self.dir}/out-%j.txt", *opts, str(path),
                      *args)
        self.jobs.append(res.stdout.strip().split(";")[0])
        return self.jobs[-1]

    def example(self, *opts: str, steps: int, step_s: float, check_every: int = 1000) -> str:
        """The example trainer (checkpoints on SIGUSR1, waits for the requeue, resumes)."""
        return self.sbatch(*opts, script=EXAMPLE, args=(
            "--steps", str(steps), "--step-s", str(step_s), "--resize-check-every", str(check_every)))

    def output(self, job: str) -> str:
        path = self.dir / f"out-{job}.txt"
        return path.read_text() if path.exists() else ""

    def show(self, job: str) -> dict[str, str]:
        out = self.sl("scontrol", "show", "job", "-o", job).stdout
        return dict(kv.split("=", 1) for kv in out.split() if "=" in kv)

    def states(self, jobs: list[str]) -> dict[str, str]:
        out = self.sl("squeue", "-h", "-t", "all", "-j", ",".join(jobs), "-o", "%i %T").stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def runs(self, jobs: list[str]) -> list[Run]:
        """Every run of ``jobs`` from sacct (requeued runs included), in start order."""
        out = self.sl("sacct", "-X", "-D", "-n", "-P", "-j", ",".join(jobs),
                      "--format=JobID,State,Start,End,NodeList,AllocTRES").stdout
        runs = []
        for line in out.splitlines():
            job, state, start, end, nodes, tres = line.split("|")
            gpus = next((int(t.split("=")[1]) for t in tres.split(",") if t.startswith("gres/gpu=")), 0)
            expanded = () if nodes in ("", "None assigned") else tuple(hostlist.expand_hostlist(nodes))
            runs.append(Run(job, state.split()[0], _epoch(start), _epoch(end), expanded, gpus))
        return sorted(runs, key=lambda r: (r.start or float("inf"), r.job_id))

    def settled(self, jobs: list[str], timeout_s: float = 240) -> list[Run]:
        """:meth:`runs` once sacct shows every job's last run ended: slurmctld sends records to
        slurmdbd asynchronously, so right after a job ends sacct may still show it running (in
        CI's 24.11 container, beside the compose stack's image builds, more than 30 s; once, in a
        fresh-clone CI with other work on the machine, more than 90 s: the torch test then passed
        alone in 67 s)."""
        out: list[Run] = []

        def done() -> bool:
            nonlocal out
            out = self.runs(jobs)
            last = {r.job_id: r for r in out}
            return set(last) == set(jobs) and all(r.end is not None and r.state not in (
                "RUNNING", "PENDING", "COMPLETING", "REQUEUED") for r in last.values())

        try:
            wait_for(done, timeout_s, "sacct to record the jobs' ends")
        except AssertionError as exc:  # what sacct did show, and what slurmctld says
            raise AssertionError(f"{exc}\nsacct: {out}\nsqueue: {self.states(jobs)}") from None
        return out

    def leaves(self) -> dict[str, str]:
        """node -> leaf switch, from ``scontrol show topology`` (the switches of level 0)."""
        out = self.sl("scontrol", "show", "topology").stdout
        leaf_of = {}
        for line in out.splitlines():
            kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
            if kv.get("Level") == "0":
                leaf_of |= dict.fromkeys(hostlist.expand_hostlist(kv["Nodes"]), kv["SwitchName"])
        return leaf_of

    def finished(self, jobs: list[str]) -> bool:
        states = self.states(jobs)
        return all(states.get(j, "COMPLETED") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
                   for j in jobs)

    def cleanup(self) -> None:
        if self.jobs:
            self.sl("scancel", *self.jobs, check=False)
            wait_for(lambda: not any(s in ("RUNNING", "COMPLETING", "CONFIGURING")
                                     for s in self.states(self.jobs).values()),
                     60, "cancelled jobs to leave the nodes")


def uid_gid(uid: int) -> int:
    import pwd

    return pwd.getpwuid(uid).pw_gid


def wait_for(pred: Callable[[], object], timeout_s: float, what: str, every_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(every_s)


@dataclass
class Daemon:
    """One ``railgang daemon run --log-format json`` process and what it wrote."""

    proc: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]
    db: Path

    def journal(self, kind: str) -> list[tuple[str, str, str]]:
        """(job, state, detail) of every journaled action of ``kind``, oldest first."""
        with closing(sqlite3.connect(self.db)) as con:
            return list(con.execute("SELECT job_id, state, detail FROM action_journal "
                                    "WHERE kind = ? ORDER BY id", (kind,)))

    def cycles(self) -> list[dict[str, object]]:
        """The cycle lines of the JSON log, oldest first."""
        out = []
        for line in self.log.read_text().splitlines():
            if line.startswith("{") and '"ms"' in line:
                out.append(json.loads(line))
        return out

    def explain(self, job: str) -> dict[str, object]:
        res = subprocess.run([RAILGANG, "explain", job, "--json"], env=self.env,
                             capture_output=True, text=True, timeout=60, check=False)
        return json.loads(res.stdout) if res.returncode == 0 else {}

    def stop(self) -> int:
        """SIGTERM by PID; the running cycle finishes, the lock is released; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(10)


def user_view(cluster: DevCluster, tmp_path: Path) -> Iterator[Cluster]:
    """``cluster`` as a user sees it; cancels the test's jobs and removes the heartbeat after
    (before the cleanup too, so no lease is granted to what the cleanup cancels)."""
    tmp_path.chmod(0o755)
    c = Cluster(cluster, tmp_path)
    try:
        yield c
    finally:
        cluster.spec.heartbeat_file.unlink(missing_ok=True)
        c.cleanup()
        cluster.spec.heartbeat_file.unlink(missing_ok=True)


@pytest.fixture
def slurm(slurm_cluster: DevCluster, tmp_path: Path) -> Iterator[Cluster]:
    """The session cluster as a user sees it."""
    yield from user_view(slurm_cluster, tmp_path)


# the classes the test jobs hold in the daemon's database, as an admin grants them (`railgang
# quota grant 0 qos normal`): the daemon re-checks every waiting job's class against them. By
# QOS (every test job runs in "normal"), so the daemon's quota tree stays empty as before.
E2E_GRANTS = [(c, "qos", "normal") for c in (0, 1, 2)]


def daemon_home() -> tuple[Path, int]:
    """A directory for one daemon run owned by the daemon's own user, a non-root Slurm administrator
    (docs/deploy.md), with its database already migrated and the test accounts' class grants.

    The user must reach the interpreter and this checkout: each directory above them that is not
    searchable by others gets o+x (search only, never o+r): /root on a machine whose Python
    lives under /root/.pyenv. Root-only daemons hid a refused lease renewal for months."""
    from sqlalchemy.orm import Session

    from railgang.db.migrate import upgrade
    from railgang.db.repositories import admin
    from railgang.db.session import make_engine
    from railgang.devcluster.cluster import DAEMON_USER, daemon_uid

    uid = daemon_uid()
    if uid is None:
        pytest.fail(f"the daemon user {DAEMON_USER!r} is missing: `railgang devcluster up` creates "
                    "it as root (the e2e daemon runs as that non-root Slurm user)")
    # not under pytest's tmp_path: its base directory is private (0700) and reset by every session
    base = TEST_ROOT / "e2e-daemons"
    base.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="daemon-", dir=base))
    home.chmod(0o755)
    for target in (Path(os.path.realpath(sys.executable)), Path(RAILGANG).resolve(),
                   Path(__file__).resolve(), home):
        for d in target.parents:
            mode = d.stat().st_mode
            if not mode & 0o001:
                d.chmod(mode | 0o001)
    url = f"sqlite:///{home / 'railgang.sqlite'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        with Session(engine) as s:
            for class_id, kind, subject in E2E_GRANTS:
                admin.grant(s, actor="e2e", class_id=class_id, kind=kind, subject=subject)
            s.commit()
    finally:
        engine.dispose()
    for path in (home, *home.iterdir()):
        os.chown(path, uid, -1)
    return home, uid


@pytest.fixture
def daemon(slurm: Cluster, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start ``railgang daemon run`` as the deployment runs it: as the ``railgang`` user, a
    non-root Slurm administrator (its own SQLite database with the test accounts' class grants, the
    cluster's heartbeat file, a 1 s cycle, a 20 s lease, no metrics endpoint); keyword arguments
    set more knobs as ``RAILGANG_<GROUP>__<KEY>`` (``daemon__policy="fifo"``). Returns once the
    first cycle has written the heartbeat, so jobs submitted from then on are leased. Stopped
    with SIGTERM."""
    spec = slurm.cluster.spec
    started: list[Daemon] = []
    home, uid = daemon_home()
    user = ["setpriv", f"--reuid={uid}", f"--regid={uid_gid(uid)}", "--clear-groups"]

    def start(**knobs: object) -> Daemon:
        env = {**os.environ, **slurm_env(spec), "RAILGANG_CONFIG": "", "HOME": str(home),
               "RAILGANG_HOME": str(home),  # nothing of this daemon outside the test's dir
               "RAILGANG_DB__URL": f"sqlite:///{home / 'railgang.sqlite'}",
               # its own grants file: the cluster's (the test accounts' grants, which the class
               # 0-2 jobs here rely on at submission) must stay as it is for the other tests
               "RAILGANG_LEDGER__GRANTS_FILE": str(home / "class_grants.txt"),
               "RAILGANG_SLURM__BACKEND": "cli", "RAILGANG_SLURM__CONF": str(spec.slurm_conf),
               "RAILGANG_SLURM__LEASE_S": str(LEASE_S),
               "RAILGANG_DAEMON__HEARTBEAT_FILE": str(spec.heartbeat_file),
               "RAILGANG_DAEMON__METRICS_PORT": "0",
               "RAILGANG_DAEMON__CYCLE_INTERVAL_S": str(CYCLE_S)}
        env |= {f"RAILGANG_{k.upper()}": str(v) for k, v in knobs.items()}
        log = tmp_path / f"daemon{len(started)}.log"
        spec.heartbeat_file.unlink(missing_ok=True)
        with log.open("wb") as f:
            proc = subprocess.Popen([*user, RAILGANG, "daemon", "run", "--log-format", "json"],
                                    env=env, stdout=f, stderr=subprocess.STDOUT)
        d = Daemon(proc, log, env, home / "railgang.sqlite")
        started.append(d)
        wait_for(lambda: spec.heartbeat_file.exists() or proc.poll() is not None, 60,
                 "the daemon's first heartbeat")
        assert proc.poll() is None, log.read_text()[-3000:]
        return d

    try:
        yield start
    finally:
        for d in started:
            d.stop()
        spec.heartbeat_file.unlink(missing_ok=True)
        shutil.rmtree(home, ignore_errors=True)
