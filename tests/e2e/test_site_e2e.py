"""Slurm's own rules on the site-like cluster (issue 35 items 1-4): three partitions (``short``
overlapping ``gpu``), h100/a100/v100 nodes whose memory (a100: 32 GB) or CPUs (v100: 8) run out
before their GPUs, QOS ``capped``, reservation ``team_b`` on n06, license ``fluent:2``
(railgang/devcluster/site.py), with the real ``railgang daemon run`` and plain (unhinted) jobs
beside hinted ones. Every Start the daemon issues must be accepted and run at once.

A second cluster (session fixture ``site_cluster``): its tests are few.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from railgang.devcluster.cluster import DevCluster
from tests.e2e.conftest import Cluster, Daemon, user_view, wait_for
from tests.e2e.test_daemon_e2e import Start, running_on

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

HONOUR_S = 15.0  # a Start Slurm honours runs on its next scheduling pass (one is triggered by it)


@pytest.fixture
def slurm(site_cluster: DevCluster, tmp_path: Path) -> Iterator[Cluster]:
    yield from user_view(site_cluster, tmp_path)


def hinted(tp: int, *opts: str) -> tuple[str, ...]:
    return (*opts, f"--comment=rg:parallel=tp{tp}")


def unhonoured(slurm: Cluster, d: Daemon, jobs: list[str]) -> list[str]:
    """Each Start of ``jobs`` Slurm refused, or accepted and did not run within HONOUR_S."""
    bad = []
    for job in jobs:
        states = [state for j, state, _ in d.journal("start") if j == job]
        if "failed" in states:
            bad.append(f"{job}: refused")
    def ran(job: str) -> bool:
        return bool(running_on(slurm, job)) or slurm.states([job]).get(job) in ("COMPLETED", "COMPLETING")

    for job in jobs:
        if any(j == job for j, _, _ in d.journal("start")):
            try:
                wait_for(lambda: ran(job), HONOUR_S, f"job {job} to run after its Start")  # noqa: B023
            except AssertionError:
                bad.append(f"{job}: started by railgang, {slurm.show(job).get('Reason')} in Slurm")
    return bad


def test_the_site_cluster_has_its_rules(slurm: Cluster) -> None:
    out = slurm.sl("sinfo", "-h", "-N", "-o", "%N %P %G %c %m").stdout.split("\n")
    rows = {tuple(line.split()) for line in out if line.strip()}
    assert ("n01", "big", "gpu:h100:8", "32", "262144") in rows
    assert ("n03", "short", "gpu:a100:8", "32", "32768") in rows
    assert ("n05", "gpu*", "gpu:v100:8", "8", "65536") in rows
    assert "Nodes=n06" in slurm.sl("scontrol", "show", "reservation", "team_b").stdout
    assert "Total=2" in slurm.sl("scontrol", "show", "license", "fluent").stdout
    qos = slurm.sl("sacctmgr", "-n", "-P", "show", "qos", "capped", "format=grptres,maxtrespu").stdout
    assert qos.strip() == "gres/gpu=16|gres/gpu=8"


def test_a_mixed_stream_gets_no_start_slurm_refuses_or_leaves_pending(slurm: Cluster, daemon: Start) -> None:
    """Plain jobs take memory on n03 and CPUs on n05 first (the daemon sees them only in sinfo's
    free CPUs and memory); then hinted jobs that fit only where Slurm's rules and the room left
    let them: a memory-bound a100 job (n03 has 8 GPUs free, 4 GB of memory), a CPU-bound
    ``short`` job (n05 has 2 CPUs, n06 is reserved), an h100 job, an excluded and a constrained
    one, an --exclusive one; a --reservation job, a --licenses job and an array are Slurm's. Before: the
    memory-bound job was started on n03 (its free GPUs) and Slurm kept it pending there."""
    mem_hog = slurm.sbatch("--nodelist=n03", "--gres=gpu:1", "--mem=28G", args=("120",))
    cpu_hog = slurm.sbatch("--nodelist=n05", "--gres=gpu:1", "-c", "6", "--mem=1G", args=("120",))
    wait_for(lambda: running_on(slurm, mem_hog) and running_on(slurm, cpu_hog), 30,
             "the plain jobs to run")
    d = daemon(daemon__policy="fifo")
    t0 = time.monotonic()
    jobs = {
        "mem": slurm.sbatch(*hinted(4, "--gres=gpu:a100:4", "--mem-per-gpu=4G"), args=("60",)),
        "cpu": slurm.sbatch(*hinted(4, "-p", "short", "--gres=gpu:4", "--cpus-per-gpu=2"), args=("60",)),
        "h100": slurm.sbatch(*hinted(8, "--gres=gpu:h100:8", "--mem=100G"), args=("60",)),
        "exclusive": slurm.sbatch(*hinted(2, "-p", "big", "--gres=gpu:2", "--exclusive"), args=("60",)),
        # tp1: the eth nodes are V100s, PCIe parts by the GPU catalogue, which host no TP group
        # (topology/node_facts.py, as in railgang sim)
        "constraint": slurm.sbatch("--gres=gpu:2", "--constraint=eth", "--exclude=n06",
                                   "--comment=rg:parallel=tp1,dp2", args=("60",)),
    }
    plain = slurm.sbatch("-p", "short", "--gres=gpu:1", args=("60",))  # beside them, Slurm's
    resv = slurm.sbatch(*hinted(1, "--account=team-b", "--reservation=team_b", "--gres=gpu:1"),
                        args=("60",))
    lic = slurm.sbatch(*hinted(1, "-L", "fluent:1", "--gres=gpu:1"), args=("60",))
    array = slurm.sbatch(*hinted(1, "--array=1-2", "--mem=1G", "--gres=gpu:1"), args=("60",))
    def shown(exc: AssertionError) -> AssertionError:  # what a failure under CI's load needs
        queue = slurm.sl("squeue", "-h", "-o", "%i %T %r %N %P").stdout
        why = {k: d.explain(j) for k, j in jobs.items() if not running_on(slurm, j)}
        return AssertionError(f"{exc}; {jobs}; squeue:\n{queue}; explain: {why}; "
                              f"starts: {d.journal('start')}")

    try:
        wait_for(lambda: all(running_on(slurm, j) for j in jobs.values()), 60, "every hinted job to run")
    except AssertionError as exc:
        raise shown(exc) from exc
    took = time.monotonic() - t0
    assert unhonoured(slurm, d, list(jobs.values())) == [], shown(AssertionError("unhonoured"))
    on = {k: running_on(slurm, j) for k, j in jobs.items()}
    assert on["mem"] == ["n04"], on  # n03's memory is the plain job's
    assert on["cpu"] in (["n03"], ["n04"]), on  # n05's CPUs are taken, n06 is team_b's
    assert on["h100"][0] in ("n01", "n02") and on["exclusive"][0] in ("n01", "n02"), on
    assert on["h100"] != on["exclusive"], on
    assert on["constraint"] == ["n05"], on  # the only eth node outside the reservation
    def left(job: str) -> bool:
        return d.explain(job).get("reason") == "left_to_slurm" or bool(running_on(slurm, job))

    try:
        for job in (resv, lic, array):  # Slurm's: left to it with the reason explain shows
            wait_for(lambda: left(job), 30, f"job {job} to be left to Slurm")  # noqa: B023
            assert not [j for j, _, _ in d.journal("start") if j == job], "railgang never starts it"
        tasks = [f"{array}_1", f"{array}_2"]  # each task a job of its own once Slurm splits it off
        wait_for(lambda: running_on(slurm, resv) == ["n06"] and running_on(slurm, lic)
                 and running_on(slurm, plain) and all(running_on(slurm, t) for t in tasks),
                 90, "Slurm to run the reservation, license, array and plain jobs")
    except AssertionError as exc:
        raise shown(exc) from exc
    print(f"site stream: {len(jobs)} hinted jobs running {took:.1f}s after submission, "
          f"0 refused or unhonoured Starts")


def test_a_job_over_its_qos_limit_is_left_to_slurm_with_the_limit(slurm: Cluster, daemon: Start) -> None:
    """QOS capped allows 8 GPUs per user: the second 8-GPU job's Start is accepted and Slurm
    holds it (QOSMaxGRESPerUser). Before: for STARTING_GRACE_S (120 s) explain said 'gone' and
    its GPUs stayed taken in the plan; now the next cycle leaves it to Slurm and says why."""
    d = daemon(daemon__policy="fifo")
    first = slurm.sbatch(*hinted(8, "--qos=capped", "--gres=gpu:h100:8"), args=("120",))
    wait_for(lambda: running_on(slurm, first), 30, "the first capped job to run")
    second = slurm.sbatch(*hinted(8, "--qos=capped", "--gres=gpu:h100:8"), args=("120",))
    wait_for(lambda: d.explain(second).get("reason") == "left_to_slurm", 20,
             "the second capped job to be left to Slurm")
    assert "QOSMaxGRESPerUser" in str(d.explain(second).get("detail"))
