"""Attained service on the real cluster (issue 33 item 1): the GPU-seconds a job received over all
its runs come from Slurm (squeue for the current run, ``sacct --duplicates`` for the earlier
ones), survive requeues and daemon restarts, and drive ``tiresias`` live."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing

import pytest

from railgang.daemon.config import SlurmSettings
from railgang.daemon.slurm.cli import CliBackend
from tests.e2e.conftest import Cluster, Daemon, wait_for
from tests.e2e.test_daemon_e2e import Start, running_on

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
ONE_NODE = ("-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8;class=3")


def requeue_and_restart(slurm: Cluster, d: Daemon, job: str, restarts: int) -> float:
    """Requeue ``job`` as a preemption does (Slurm ends the run, the job waits again with a new
    submit time) and wait until it runs again; when the requeue was sent."""
    sent = time.time()
    [node] = running_on(slurm, job)
    # held until its old run has left the node: on a loaded 24.11 (CI's suites run) a plain
    # requeue was relaunched on the same node at once and that run failed at launch (exit 1)
    slurm.sl("scontrol", "requeuehold", job)
    wait_for(lambda: slurm.sl("sinfo", "-h", "-n", node, "-o", "%t").stdout.strip() == "idle",
             30, f"{node} to be free of job {job}'s old run")
    slurm.sl("scontrol", "release", job)
    try:  # whoever starts it (the daemon, or Slurm): what counts is what it attained
        wait_for(lambda: slurm.show(job).get("Restarts") == str(restarts) and running_on(slurm, job),
                 45, f"job {job} to run again (restart {restarts})")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {slurm.show(job)}; explain {d.explain(job)}; daemon log "
                             f"{d.log.read_text()[-4000:]}") from exc
    return sent


def ended_gpu_s(slurm: Cluster, job: str, runs: int) -> float:
    """GPU-seconds of the job's ended runs, as sacct shows them (once it has all ``runs``)."""
    def ended() -> list[float]:
        return [r.gpus * (r.end - r.start) for r in slurm.runs([job])
                if r.state == "REQUEUED" and r.start is not None and r.end is not None]

    wait_for(lambda: len(ended()) == runs, 20, f"sacct to record {runs} ended run(s)")
    return sum(ended())


def attained_gpu_s(d: Daemon, job: str) -> float:
    got = d.explain(job).get("attained_gpu_h")
    return float(got) * 3600.0 if isinstance(got, int | float) else -1.0


def test_a_requeued_job_keeps_its_attained_service_across_a_daemon_restart(
        slurm: Cluster, daemon: Start) -> None:
    """A job requeued as a preemption does keeps the GPU-seconds of its first run; a restarted
    daemon (its predecessor's explanation row removed, so that what explain shows is its own)
    counts them again from sacct, plus the current run from squeue."""
    d = daemon(daemon__policy="fifo", daemon__preempt="false")
    job = slurm.sbatch(*ONE_NODE, args=("300",))
    wait_for(lambda: running_on(slurm, job), 30, "the job to start")
    time.sleep(3)
    sent = requeue_and_restart(slurm, d, job, 1)
    first = ended_gpu_s(slurm, job, 1)
    assert first >= 8 * 2
    wait_for(lambda: attained_gpu_s(d, job) >= first - 2, 20, "explain to count the first run")

    d.stop()  # a restarted daemon knows nothing but what Slurm shows
    with closing(sqlite3.connect(d.db)) as con, con:
        con.execute("DELETE FROM job_explanations WHERE job_id = ?", (job,))
    d = daemon(daemon__policy="fifo", daemon__preempt="false")
    wait_for(lambda: d.explain(job).get("state") == "running", 20, "the new daemon's row")
    assert first - 2 <= attained_gpu_s(d, job) <= first + 8 * (time.time() - sent) + 2
    # the backend as the new daemon builds it: sacct's ended run plus squeue's current one
    now = time.time()
    run = CliBackend(SlurmSettings(conf=slurm.cluster.spec.slurm_conf)).snapshot(now).running[job]
    assert first + 8 * (now - run.start_time) - 8 <= run.attained_at(now)
    assert run.attained_at(now) <= first + 8 * (now - run.start_time) + 8


def test_tiresias_demotes_a_long_job_live_and_a_newcomer_starts_first(slurm: Cluster,
                                                                      daemon: Start) -> None:
    """Tiresias' first queue ends at 0.02 GPU-h (72 GPU-s: 9 s on 8 GPUs). A job that ran
    past it and waits again is in queue 1: a newcomer submitted after it starts first on the
    one node that frees (FIFO would start the older one)."""
    d = daemon(daemon__policy="tiresias", daemon__preempt="false",
               daemon__tiresias_thresholds_gpu_h="[0.02]")
    long = slurm.sbatch(*ONE_NODE, args=("300",))
    wait_for(lambda: running_on(slurm, long), 30, "the long job to start")
    started_by = time.time()
    wait_for(lambda: d.explain(long).get("state") == "running", 10, "explain to see it run")
    assert d.explain(long).get("tiresias_level") == 0
    [node] = running_on(slurm, long)
    filler = slurm.sbatch("-N15", f"--exclude={node}", "--gres=gpu:8", args=("300",))  # plain
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    wait_for(lambda: d.explain(long).get("tiresias_level") == 1, 30,
             "the long job to pass 0.02 GPU-h while it runs (demoted live)")
    # its run must also pass the threshold in sacct's whole seconds once it ended: a run requeued
    # right at 9 s was recorded as 72 GPU-s or less, and the job waited in queue 0 again
    time.sleep(max(0.0, started_by + 12.0 - time.time()))

    # it waits again (requeued, held a moment so that a plain job takes its node until both
    # wait): a blocker that ended on its own could free the node before the daemon had seen the
    # newcomer, and the long job, then alone, rightly took it (a loaded CI run, 8 s blocker)
    slurm.sl("scontrol", "requeuehold", long)
    blocker = slurm.sbatch("-N1", f"--nodelist={node}", "--gres=gpu:8", args=("300",))  # plain
    wait_for(lambda: running_on(slurm, blocker), 30, "the blocker to run")
    slurm.sl("scontrol", "release", long)
    time.sleep(1.1)  # the newcomer is submitted after the long job entered the queue again
    newcomer = slurm.sbatch(*ONE_NODE, args=("300",))
    wait_for(lambda: d.explain(long).get("state") == "waiting"
             and d.explain(newcomer).get("state") == "waiting", 20, "both to wait")
    # its first run counts once sacct has recorded its end (attained.py), a cycle or more later
    # under load: a CI run read the row first written without it
    wait_for(lambda: d.explain(long).get("tiresias_level") == 1, 20, "explain to count the long job's first run")
    assert d.explain(newcomer).get("tiresias_level") == 0
    assert slurm.show(long)["SubmitTime"] < slurm.show(newcomer)["SubmitTime"]

    slurm.sl("scancel", blocker)
    try:
        wait_for(lambda: running_on(slurm, newcomer), 30, "the newcomer to start when the node frees")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: long {slurm.show(long)}, explain {d.explain(long)}; newcomer "
                             f"{slurm.show(newcomer)}, explain {d.explain(newcomer)}; daemon log "
                             f"{d.log.read_text()[-4000:]}") from exc
    assert running_on(slurm, newcomer) == [node]
    assert slurm.show(long)["JobState"] == "PENDING"
    slurm.sl("scancel", filler, long, newcomer)
