"""CliBackend against the real local Slurm 22.05 cluster (16 nodes x 8 GPUs, 4 leaves, slurmdbd).

Every test writes a fresh heartbeat (so job_submit.lua leases its jobs), uses its own nodes, and
cancels its jobs at the end, so the tests share one cluster without seeing each other's work.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from railgang.daemon.backend import LeaseBackend
from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.actions import (
    DrainNode,
    Migrate,
    Preempt,
    Resize,
    SetPriority,
    Start,
    TagNode,
)
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.failures.advice import advised_interval_s
from railgang.daemon.slurm.cli import CliBackend, write_heartbeat
from railgang.devcluster.cluster import DevCluster
from railgang.training import TrainingContext
from tests.support.slurm import job_fields, sl

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

TRAP_SCRIPT = """#!/bin/bash
# a training job's contract in miniature: checkpoint on USR1, note every (re)start
trap 'echo usr1 >> {dir}/sig.$SLURM_JOB_ID' USR1
echo "${{SLURM_RESTART_COUNT:-0}} $SLURM_JOB_NODELIST" >> {dir}/run.$SLURM_JOB_ID
while true; do sleep 1 & wait; done
"""


@pytest.fixture
def backend(slurm_cluster: DevCluster) -> Iterator[CliBackend]:
    write_heartbeat(slurm_cluster.spec.heartbeat_file, time.time(), 600)
    try:
        yield CliBackend(SlurmSettings(conf=slurm_cluster.spec.slurm_conf, lease_s=600, resize_grace_s=2))
    finally:
        slurm_cluster.spec.heartbeat_file.unlink(missing_ok=True)


@pytest.fixture
def submit(slurm_cluster: DevCluster, tmp_path: Path) -> Iterator[Callable[..., str]]:
    """sbatch with railgang hints; every job submitted is cancelled after the test."""
    jobs: list[str] = []
    script = tmp_path / "job.sh"
    script.write_text(TRAP_SCRIPT.format(dir=tmp_path))
    script.chmod(0o755)

    def sbatch(*opts: str, comment: str = "rg:parallel=tp8,dp1", wrap: str | None = None) -> str:
        what = [f"--wrap={wrap}"] if wrap is not None else [str(script)]
        res = sl(slurm_cluster, "sbatch", "--parsable", f"--chdir={tmp_path}", "--output=/dev/null",
                 "--account=team-a", f"--comment={comment}", *opts, *what)
        jobs.append(res.stdout.strip().split(";")[0])
        return jobs[-1]

    yield sbatch
    if jobs:
        sl(slurm_cluster, "scancel", *jobs, check=False)


def wait_for(backend: CliBackend, ok: Callable[[Snapshot], bool], timeout_s: float = 30) -> Snapshot:
    deadline = time.monotonic() + timeout_s
    while True:
        snap = backend.snapshot(time.time())
        if ok(snap) or time.monotonic() > deadline:
            return snap
        time.sleep(0.5)


def test_snapshot_of_the_cluster(backend: CliBackend) -> None:
    assert isinstance(backend, LeaseBackend)
    snap = backend.snapshot(time.time())
    assert sorted(snap.nodes) == [f"n{i:02d}" for i in range(1, 17)]
    assert {n.gpus for n in snap.nodes.values()} == {8}
    assert [len(snap.fabric.nodes_under(leaf)) for leaf in snap.fabric.leaves] == [4, 4, 4, 4]
    assert snap.fabric.leaf_of("n05") == "leaf2"
    # squeue -O (the ids: how large a full read is), squeue --json, sinfo, sshare: a constant
    assert backend.runner.calls == 4
    assert {"team-a", "team-b"} <= set(snap.accounts)


def test_hinted_job_is_queued_with_its_hints(backend: CliBackend, submit: Callable[..., str]) -> None:
    job = submit("-N2", "--gres=gpu:8", comment="rg:parallel=tp8,pp1,dp2;elastic=1:4;class=1")
    snap = wait_for(backend, lambda s: any(j.job_id == job for j in s.pending))
    queued = {j.job_id: j for j in snap.pending}[job]
    assert (queued.gpus, queued.tp, queued.pp, queued.replicas, queued.priority_class) == (16, 8, 1, 2, 1)
    assert (queued.elastic_min, queued.elastic_max, queued.account) == (1, 4, "team-a")
    assert backend.last is not None and backend.last.jobs[job].reason == "BeginTime"


def test_start_on_exact_nodes_then_shrink(backend: CliBackend, submit: Callable[..., str],
                                          slurm_cluster: DevCluster) -> None:
    job = submit("-N2", "--gres=gpu:8", comment="rg:parallel=tp8,dp2;elastic=1:2;class=2")
    wait_for(backend, lambda s: any(j.job_id == job for j in s.pending))
    full = {"n09": tuple(range(8)), "n10": tuple(range(8))}
    [res] = backend.apply([Start(job, full, 2)], time.time())
    assert res.ok, res.detail
    snap = wait_for(backend, lambda s: job in s.running)
    assert snap.running[job].assignment == full and snap.running[job].replicas == 2
    # the start wrote the Young-Daly interval for these nodes into the tag, and the training
    # helper reads it back from squeue as the job's user would (issue 33 item 3)
    advised = advised_interval_s(snap.running[job].job.checkpoint_cost_s, full, snap.fabric)
    ctx = TrainingContext({"SLURM_JOB_ID": job},
                          runner=lambda argv: sl(slurm_cluster, *argv).stdout)
    assert advised is not None and ctx.advised_checkpoint_interval_s() == advised
    assert all(snap.free["n09"] == frozenset() for _ in (0,))
    calls = backend.runner.calls
    [res] = backend.apply([Resize(job, 1, {"n09": tuple(range(8))}, 2)], time.time())
    assert res.ok, res.detail
    assert backend.runner.calls == calls + 1
    snap = wait_for(backend, lambda s: s.running[job].gpus == 8)
    assert dict(snap.running[job].assignment) == {"n09": tuple(range(8))}
    assert snap.running[job].replicas == 1 and snap.free["n10"] == frozenset(range(8))


def trap_set(tmp_path: Path, job: str, timeout_s: float = 30) -> None:
    """Wait until the job's script has set its USR1 trap (it notes its start right after):
    Slurm calls a job RUNNING before bash has read its first line, and a signal sent before the
    trap kills the script instead (a race a loaded CI machine lost)."""
    deadline = time.monotonic() + timeout_s
    while not (tmp_path / f"run.{job}").exists():
        assert time.monotonic() < deadline, f"job {job}'s script did not start in {timeout_s:g} s"
        time.sleep(0.2)


def test_preempt_signals_then_requeues_under_lease(backend: CliBackend, submit: Callable[..., str],
                                                   tmp_path: Path) -> None:
    job = submit("-N1", "--gres=gpu:8", comment="rg:parallel=tp8;class=3")
    wait_for(backend, lambda s: any(j.job_id == job for j in s.pending))
    assert backend.apply([Start(job, {"n11": tuple(range(8))}, 1)], time.time())[0].ok
    wait_for(backend, lambda s: job in s.running)
    trap_set(tmp_path, job)
    [res] = backend.apply([Preempt(job, grace_s=3)], time.time())
    assert res.ok, res.detail
    snap = backend.snapshot(time.time())
    assert snap.running[job].preempt_deadline is not None  # the mark is read back from Slurm
    deadline = time.monotonic() + 20
    while not (tmp_path / f"sig.{job}").exists() and time.monotonic() < deadline:
        time.sleep(0.3)
    assert (tmp_path / f"sig.{job}").read_text().strip() == "usr1"
    time.sleep(3.5)
    # a fresh backend (a restarted daemon) finishes the preemption from Slurm's state alone
    fresh = CliBackend(backend.settings)
    fresh.snapshot(time.time())
    assert [f.line for f in fresh.finished] == [f"job {job}: preempted, requeued"]
    snap = wait_for(fresh, lambda s: any(j.job_id == job for j in s.pending))
    queued = {j.job_id: j for j in snap.pending}[job]
    assert queued.state.preemptions == 1
    rec = fresh.last.jobs[job] if fresh.last else None
    assert rec is not None and rec.eligible_time > time.time()  # under a lease again, not running


def test_a_script_the_signal_kills_is_requeued_not_lost(backend: CliBackend, slurm_cluster: DevCluster,
                                                        submit: Callable[..., str]) -> None:
    """A batch script that neither execs its trainer nor traps SIGUSR1 dies of the checkpoint
    signal and Slurm ends the job FAILED; railgang requeues it at once (not after the grace),
    since nothing else would bring it back."""
    job = submit("-N1", "--gres=gpu:8", comment="rg:parallel=tp8;class=3", wrap="sleep 600")
    wait_for(backend, lambda s: any(j.job_id == job for j in s.pending))
    assert backend.apply([Start(job, {"n13": tuple(range(8))}, 1)], time.time())[0].ok
    wait_for(backend, lambda s: job in s.running)
    [res] = backend.apply([Preempt(job, grace_s=600)], time.time())
    assert res.ok, res.detail
    deadline = time.monotonic() + 30
    while job_fields(slurm_cluster, job)["JobState"] != "FAILED" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert job_fields(slurm_cluster, job)["ExitCode"] == "0:10"  # killed by SIGUSR1
    backend.snapshot(time.time())
    assert [f.line for f in backend.finished] == [f"job {job}: preempted, requeued"]
    snap = wait_for(backend, lambda s: any(j.job_id == job for j in s.pending))
    assert {j.job_id: j for j in snap.pending}[job].state.preemptions == 1
    assert job_fields(slurm_cluster, job)["Restarts"] == "1"


def test_migrate_is_a_checkpoint_then_a_requeue(backend: CliBackend, submit: Callable[..., str],
                                                tmp_path: Path) -> None:
    """R-T8 on Slurm: the job checkpoints on the signal and goes back to the queue, where the
    core places it again (the target is not pinned across the requeue)."""
    job = submit("-N1", "--gres=gpu:8", comment="rg:parallel=tp8;class=3")
    wait_for(backend, lambda s: any(j.job_id == job for j in s.pending))
    assert backend.apply([Start(job, {"n10": tuple(range(8))}, 1)], time.time())[0].ok
    wait_for(backend, lambda s: job in s.running)
    trap_set(tmp_path, job)
    [res] = backend.apply([Migrate(job, 3.0, {"n09": tuple(range(8))}, 1, 900.0, 240.0, 8)], time.time())
    assert res.ok, res.detail
    assert backend.snapshot(time.time()).running[job].preempt_deadline is not None
    deadline = time.monotonic() + 20
    while not (tmp_path / f"sig.{job}").exists() and time.monotonic() < deadline:
        time.sleep(0.3)
    assert (tmp_path / f"sig.{job}").read_text().strip() == "usr1"
    time.sleep(3.5)
    snap = wait_for(backend, lambda s: any(j.job_id == job for j in s.pending))
    assert {j.job_id: j for j in snap.pending}[job].state.preemptions == 1


def test_grow_by_requeue_restarts_at_new_size(backend: CliBackend, submit: Callable[..., str],
                                              tmp_path: Path) -> None:
    job = submit("-N1", "--gres=gpu:8", comment="rg:parallel=tp8,dp1;elastic=1:2;class=2")
    wait_for(backend, lambda s: any(j.job_id == job for j in s.pending))
    assert backend.apply([Start(job, {"n12": tuple(range(8))}, 1)], time.time())[0].ok
    wait_for(backend, lambda s: job in s.running)
    trap_set(tmp_path, job)
    grown = {"n11": tuple(range(8)), "n12": tuple(range(8))}
    [res] = backend.apply([Resize(job, 2, grown, 1)], time.time())
    assert res.ok and "grow by requeue" in res.detail
    snap = wait_for(backend, lambda s: job in s.running and s.running[job].gpus == 16, timeout_s=40)
    assert dict(snap.running[job].assignment) == grown and snap.running[job].replicas == 2
    runs = (tmp_path / f"run.{job}").read_text().split("\n")
    assert runs[0] == "0 n12" and runs[1] == "1 n[11-12]"  # the script saw the restart and new nodes
    assert (tmp_path / f"sig.{job}").exists()


def test_drain_and_tag_node(backend: CliBackend, slurm_cluster: DevCluster) -> None:
    try:
        results = backend.apply([DrainNode("n16", "lame IB link"), TagNode("n15", "lame")], time.time())
        assert [r.ok for r in results] == [True, True], results
        snap = backend.snapshot(time.time())
        assert snap.nodes["n16"].state.value == "drain" and "n16" not in snap.free
        assert snap.nodes["n15"].tags == {"lame"}
        reason = sl(slurm_cluster, "sinfo", "-h", "-n", "n16", "-o", "%E").stdout.strip()
        assert reason == "railgang: lame IB link"
        again = backend.apply([TagNode("n15", "lame")], time.time())[0]
        assert again.ok and again.detail == "already tagged"
        off = backend.apply([TagNode("n15", "lame", remove=True)], time.time())[0]
        assert off.ok, off  # the links were repaired: the feature comes off
        assert backend.snapshot(time.time()).nodes["n15"].tags == frozenset()
        twice = backend.apply([TagNode("n15", "lame", remove=True)], time.time())[0]
        assert twice.ok and twice.detail == "not tagged"
    finally:
        sl(slurm_cluster, "scontrol", "update", "nodename=n16", "state=resume", check=False)
        sl(slurm_cluster, "scontrol", "update", "nodename=n15", "AvailableFeatures=", "ActiveFeatures=",
           check=False)


def test_refused_actions_are_results(backend: CliBackend, submit: Callable[..., str],
                                     slurm_cluster: DevCluster) -> None:
    job = submit("-N1", "--gres=gpu:8")
    sl(slurm_cluster, "scontrol", "update", "nodename=n14", "state=drain", "reason=test")
    try:
        backend.snapshot(time.time())
        results = backend.apply([
            Start(job, {"n14": tuple(range(8))}, 1),
            Start("999999", {"n13": tuple(range(8))}, 1),
            SetPriority("999998", 10),
            Preempt("999997", grace_s=1),
            DrainNode("no-such-node", "x"),
        ], time.time())
    finally:
        sl(slurm_cluster, "scontrol", "update", "nodename=n14", "state=resume", check=False)
    assert [r.ok for r in results] == [False] * 5
    assert "node n14 is drain" in results[0].detail
    assert "Invalid job id specified" in results[1].detail and "Invalid job id" in results[2].detail
    assert "not in Slurm's queue" in results[3].detail
    assert "Invalid node name specified" in results[4].detail


def test_set_priority_and_renewal_are_batched(backend: CliBackend, submit: Callable[..., str],
                                              slurm_cluster: DevCluster) -> None:
    jobs = [submit("-N1", "--gres=gpu:1", comment="rg:class=3") for _ in range(20)]
    backend.snapshot(time.time())
    calls = backend.runner.calls
    results = backend.apply([SetPriority(j, 1000 + i) for i, j in enumerate(jobs)], time.time())
    assert all(r.ok for r in results) and backend.runner.calls == calls + 1  # one scontrol
    out = sl(slurm_cluster, "squeue", "-h", "-j", ",".join(jobs), "-o", "%i %Q").stdout.split()
    prios = dict(zip(out[::2], out[1::2], strict=True))
    assert [int(prios[j]) for j in jobs] == [1000 + i for i in range(20)]
    calls = backend.runner.calls
    assert backend.renew_leases(jobs, time.time()) == {}
    assert backend.runner.calls == calls + 1
    eligible = backend.snapshot(time.time()) and backend.last
    assert eligible is not None
    assert all(eligible.jobs[j].eligible_time >= time.time() + 500 for j in jobs)


def test_leases_renewed_on_their_thread_in_bulk_and_a_start_keeps_none(
        backend: CliBackend, submit: Callable[..., str], slurm_cluster: DevCluster) -> None:
    """Issue 37 item 3: the renewal thread renews many leases with one scontrol; a job Slurm no
    longer holds is refused on its own; a job started right after its renewal was handed over
    runs (no renewal reaches slurmctld after its Start) and the others keep their lease."""
    jobs = [submit("-N1", "--gres=gpu:1", comment="rg:class=3") for _ in range(6)]
    gone = jobs.pop()
    sl(slurm_cluster, "scancel", gone)
    backend.snapshot(time.time())
    calls = backend.runner.calls
    try:
        assert backend.renew_leases_later([*jobs, gone], time.time()) == (0, {})
        assert backend.renewer.flush(30)
        assert backend.runner.calls == calls + 1  # one scontrol for the six
        renewed, refused = backend.renew_leases_later([], time.time())
        assert renewed == 5 and list(refused) == [gone]
        backend.renew_leases_later(jobs, time.time())  # as a cycle does, then its Start
        [res] = backend.apply([Start(jobs[0], {"n11": (0,)}, 1)], time.time())
        assert res.ok, res.detail
        assert backend.renewer.flush(30)
    finally:
        backend.close()
    snap = wait_for(backend, lambda s: jobs[0] in s.running)
    assert jobs[0] in snap.running
    assert backend.last is not None
    assert all(backend.last.jobs[j].eligible_time >= time.time() + 500 for j in jobs[1:])
