"""The training contract's progress report on the real Slurm cluster, end to end: the example
trainer writes ``total``/``step_s``/``compute_s`` into its Comment, the CLI backend turns it into
the work left, the daemon's start-time estimate of a job waiting behind it says its remaining
time came from ``progress``, and the daemon stores the step timings the report's
communication-bound detector reads (``sacct`` learns a Comment only at the job's end)."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from contextlib import closing

import pytest

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli import CliBackend
from railgang.training import read_progress
from tests.e2e.conftest import RAILGANG, Cluster, Daemon, wait_for
from tests.e2e.test_daemon_e2e import Start, running_on

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
STEPS, STEP_S = 160, 0.5  # one replica: 80 s of training


def test_progress_with_total_reaches_the_estimate_and_the_step_timings(slurm: Cluster,
                                                                       daemon: Start) -> None:
    d: Daemon = daemon(daemon__policy="fifo", daemon__preempt="false",
                       daemon__estimate_interval_s="2")
    trainer = slurm.example("-N1", "--gres=gpu:8", "--rg-parallel=tp8", "--rg-class=3",
                            "--time=30", steps=STEPS, step_s=STEP_S)
    wait_for(lambda: running_on(slurm, trainer), 30, "the trainer to start")
    wait_for(lambda: "total=" in slurm.show(trainer).get("Comment", ""), 30,
             "the trainer's first progress report")
    p = read_progress(slurm.show(trainer)["Comment"])
    assert p is not None and p.total == STEPS and p.step_s is not None
    assert p.step_s >= STEP_S * 0.9 and p.compute_s == pytest.approx(0.8 * p.step_s, rel=0.01)

    # the CLI backend's snapshot: the work left from the report, not the 30 min limit
    snap = CliBackend(SlurmSettings(conf=slurm.cluster.spec.slurm_conf)).snapshot(time.time())
    run = snap.running[trainer]
    assert run.job.work_remaining_s is not None
    assert 0 < run.job.work_remaining_s <= STEPS * p.step_s + 1

    # a job waiting behind it: everything else is full, so it starts when the trainer ends
    [node] = running_on(slurm, trainer)
    filler = slurm.sbatch("-N15", f"--exclude={node}", "--gres=gpu:8", args=("300",))  # plain
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    waiting = slurm.sbatch("-N1", "--gres=gpu:8", "--time=10",
                           "--comment=rg:parallel=tp8;class=3", args=("5",))

    def estimated() -> dict[str, object] | None:
        est = d.explain(waiting).get("estimate")
        return est if isinstance(est, dict) and est.get("status") == "estimated" else None

    wait_for(estimated, 60, "an estimate for the waiting job")
    est = estimated()
    assert est is not None and est["remaining_from"] == {"progress": 1}, est
    # what the trainer has left (<= 80 s) on the simulated daemon's 60 s cycle grid, far from
    # its 30 min time limit (the time_limit source would say about 1800 s)
    assert isinstance(est["start_s"], float) and est["start_s"] <= STEPS * STEP_S + 2 * 60, est
    text = subprocess.run([RAILGANG, "explain", waiting], env=d.env, capture_output=True,
                          text=True, timeout=60, check=True).stdout
    assert "remaining time from progress 1" in text, text

    # the daemon keeps the trainer's step and compute time for the report (one row per 5 min)
    with closing(sqlite3.connect(d.db)) as con:
        rows = list(con.execute(
            "SELECT step_s, compute_s FROM step_timings JOIN jobs ON jobs.id = "
            "step_timings.job_id WHERE jobs.slurm_job_id = ?", (trainer,)))
    assert len(rows) == 1 and 0 < rows[0][1] < rows[0][0], rows
    # the sacct ingest that follows keeps that row and fills in the job (account, segments)
    def ingested() -> bool:
        # again until sacct shows the trainer: on a loaded machine slurmdbd lags (CI's 24.11
        # suites run once found no usage row after a single ingest; alone it passes)
        subprocess.run([RAILGANG, "ledger", "ingest"], env=d.env, capture_output=True,
                       text=True, timeout=120, check=True)
        with closing(sqlite3.connect(d.db)) as con:
            n = con.execute("SELECT count(*) FROM usage_records JOIN jobs ON jobs.id = "
                            "usage_records.job_id WHERE jobs.slurm_job_id = ?",
                            (trainer,)).fetchone()
        return bool(n[0] >= 1)

    wait_for(ingested, 60, "the trainer's usage in the ledger")
    with closing(sqlite3.connect(d.db)) as con:
        assert con.execute("SELECT count(*) FROM step_timings").fetchone()[0] >= 1
    slurm.sl("scancel", filler, waiting, trainer)
