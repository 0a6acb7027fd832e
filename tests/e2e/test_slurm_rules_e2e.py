"""Issue 35 (Slurm's own rules) on the real 16-node × 8-GPU Slurm 22.05 cluster, one partition
``gpu``, with the real ``railgang daemon run`` process; docs/slurm-backend.md, "Slurm's own
rules". Features and partitions beyond ``gpu`` are covered by unit tests only
(tests/daemon/slurm/cli/test_slurm_rules.py): the session cluster has neither."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from tests.e2e.conftest import LEASE_S, SCHEDULING_PASS_S, Cluster, wait_for
from tests.e2e.test_daemon_e2e import Start, gang, running_on

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def test_an_excluded_job_is_started_where_it_may_run_and_runs(slurm: Cluster, daemon: Start) -> None:
    """Before: a hinted one-node job with --exclude was pinned to an excluded node (the first
    free one); Slurm accepted the update and kept it PENDING forever, its GPUs counted taken."""
    daemon(daemon__policy="fifo")
    job = slurm.sbatch("-N1", "--gres=gpu:8", "--exclude=n[01-15]", "--comment=rg:parallel=tp8",
                       args=("60",))
    wait_for(lambda: running_on(slurm, job) == ["n16"], 30, "the excluded job to run on n16")


def test_a_users_nodelist_is_left_to_slurm_and_runs(slurm: Cluster, daemon: Start) -> None:
    d = daemon(daemon__policy="fifo")
    job = slurm.sbatch("-N1", "--gres=gpu:1", "--nodelist=n05", "--comment=rg:parallel=tp1",
                       args=("60",))
    wait_for(lambda: d.explain(job).get("reason") == "left_to_slurm" or running_on(slurm, job),
             30, "the --nodelist job to be left to Slurm")
    # its lease was released: Slurm's own scheduler runs it where the user asked
    wait_for(lambda: running_on(slurm, job) == ["n05"], SCHEDULING_PASS_S,
             "Slurm to run the --nodelist job on n05")
    assert not [j for j, state, _ in d.journal("start") if j == job], "railgang never planned it"


def test_a_held_job_says_held_holds_no_gpus_and_runs_once_released(slurm: Cluster, daemon: Start) -> None:
    """A hinted job its owner holds (``sbatch --hold``: squeue's reason JobHeldUser) is out of
    the queue the core sees: explain says ``held`` (before: ``gone``), and a gang needing every
    GPU starts beside it. Its lease is renewed while it is held (before, it lapsed, and once
    released Slurm ran the job wherever its own pass put it), so railgang places it once
    released."""
    d = daemon(daemon__policy="fifo")
    held = slurm.sbatch("--hold", "-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8;class=1",
                        args=("5",))
    lease = slurm.show(held)["StartTime"]
    wait_for(lambda: d.explain(held).get("reason") == "held", 30, "explain to say the job is held")
    assert "JobHeldUser" in str(d.explain(held).get("detail"))
    full = slurm.sbatch(*gang(16, 3), args=("30",))  # every GPU of the cluster
    wait_for(lambda: running_on(slurm, full), 30, "the 16-node gang to start beside the held job")
    # held past its first lease's end: before, the lease lapsed there and Slurm's own pass ran
    # the job once released (the journal below had no Start of it)
    lapse = datetime.fromisoformat(lease).timestamp()
    wait_for(lambda: time.time() > lapse + 2, 60, "the held job to outlast its first lease")
    assert slurm.show(held)["Reason"] == "JobHeldUser"  # the renewals left the hold as it was
    slurm.sl("scancel", full)
    slurm.sl("scontrol", "release", held)
    wait_for(lambda: running_on(slurm, held), 60, "the released job to run")
    assert [j for j, _, _ in d.journal("start")].count(held) == 1, "railgang placed it"


def test_a_job_waiting_on_its_dependency_holds_no_gpus(slurm: Cluster, daemon: Start) -> None:
    """A hinted job with --dependency=afterok:<a running job> is out of the queue the core sees
    (explain says it waits on its dependency): a gang needing every other GPU starts beside it;
    once the dependency is met (the running job ends) railgang places it. The dependency
    outlasts the dependent job's first lease while the core's queue is empty: before, its lease
    lapsed there and Slurm's own pass ran it once the dependency was met."""
    d = daemon(daemon__policy="fifo")
    first = slurm.sbatch(*gang(1, 3), args=(str(LEASE_S + 15),))
    wait_for(lambda: running_on(slurm, first), 30, "the first job to start")
    dep = slurm.sbatch("-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8;class=1",
                       f"--dependency=afterok:{first}", args=("5",))
    wait_for(lambda: d.explain(dep).get("reason") == "waiting_on_dependency", 30,
             "explain to say the job waits on its dependency")
    full = slurm.sbatch(*gang(15, 3), args=("30",))  # every GPU the first job does not hold
    wait_for(lambda: running_on(slurm, full), 30, "the 15-node gang to start beside the dependent job")
    e = d.explain(dep)
    assert f"afterok:{first}" in str(e.get("detail")), e
    slurm.sl("scancel", full)
    wait_for(lambda: running_on(slurm, dep), 60, "the dependent job to run once its dependency is met")
    assert [j for j, _, _ in d.journal("start")].count(dep) == 1, "railgang placed it"


def test_an_exclude_changed_while_waiting_is_seen_before_the_start_is_retried(
        slurm: Cluster, daemon: Start) -> None:
    """An owner's ``scontrol update ExcNodeList=`` on a waiting job is in no narrow read: the
    record carries the last full read's list (up to ``narrow_full_read_s`` old), so the daemon
    may pin the job to a node it now excludes, and Slurm takes that update and keeps the job
    pending (22.05: BadConstraints, priority 0). A job the daemon started that is still waiting
    has its list read again the next cycle: pinned where it may not run, that Start is over, its
    GPUs free, and the job is started where it may run."""
    d = daemon(daemon__policy="fifo", slurm__narrow_full_read_s=600)  # no full read to hide it
    first = slurm.sbatch("-N1", "--gres=gpu:8", "--nodelist=n01", args=("300",))  # plain jobs
    rest = slurm.sbatch("-N15", "--gres=gpu:8", "--exclude=n01", args=("300",))
    wait_for(lambda: running_on(slurm, first) and running_on(slurm, rest), 30, "the fillers to run")
    job = slurm.sbatch("-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8", args=("60",))
    wait_for(lambda: d.explain(job).get("reason") not in (None, ""), 30, "the daemon to see the job")
    # a job that starts makes the next read a full one (22.05: every record): the job's record,
    # --exclude list included, is from then on carried from that read (24.11+: read by id)
    blip = slurm.sbatch("-N1", "--nodelist=n16", args=("1",))  # no GPUs: it runs beside `rest`
    wait_for(lambda: slurm.states([blip]).get(blip) == "COMPLETED", 30, "the CPU job to run")
    seen = len(d.cycles())
    wait_for(lambda: len(d.cycles()) >= seen + 2, 30, "two more cycles")
    slurm.sl("scontrol", "update", f"JobId={job}", "ExcNodeList=n01")
    slurm.sl("scancel", first)  # n01 alone is free: the stale record says the job may use it
    wait_for(lambda: any(j == job for j, _, _ in d.journal("start")), 30, "the stale Start")
    slurm.sl("scancel", rest)
    # before: it sat pinned to n01 (22.05: BadConstraints, priority 0) until the grace ran out
    wait_for(lambda: running_on(slurm, job), 15, "the job to run where it may")
    assert "n01" not in running_on(slurm, job)
    assert [j for j, _, _ in d.journal("start")].count(job) == 2
