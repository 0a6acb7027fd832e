"""End to end on the real 16-node × 8-GPU Slurm 22.05 cluster: hinted jobs go in with ``sbatch``,
the real ``railgang daemon run`` process schedules them, and the results are read back the way a
user reads them (squeue, scontrol, sacct, the job's own output). See docs/testing.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import hostlist
import pytest

from tests.e2e.conftest import CYCLE_S, Cluster, Daemon, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

Start = Callable[..., Daemon]


def gang(nodes: int, klass: int, extra: str = "") -> tuple[str, ...]:
    """sbatch options of a whole-node tp8 gang of ``nodes`` nodes in priority class ``klass``."""
    return (f"-N{nodes}", "--gres=gpu:8", f"--comment=rg:parallel=tp8,dp{nodes};class={klass}{extra}")


def running_on(slurm: Cluster, job: str) -> list[str]:
    fields = slurm.show(job)
    if fields.get("JobState") != "RUNNING":
        return []
    return list(hostlist.expand_hostlist(fields["NodeList"]))


def test_lame_node_gets_no_new_gang_but_single_node_jobs(slurm: Cluster, daemon: Start) -> None:
    """A node tagged lame-link in Slurm (feature rg_lame-link, nothing in the daemon's memory)
    is kept out of every new multi-node gang; a one-node job may still run there."""
    d = daemon(daemon__policy="fifo")
    leaves = slurm.leaves()
    leaf = sorted(n for n, sw in leaves.items() if sw == leaves["n05"])
    lame, healthy = leaf[0], leaf[1:]
    others = sorted(set(leaves) - set(leaf))
    filler = slurm.sbatch(f"-N{len(others)}", f"--nodelist={hostlist.collect_hostlist(others)}",
                          "--gres=gpu:8", args=("300",))  # plain Slurm: only one leaf stays free
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    slurm.sl("scontrol", "update", f"nodename={lame}", "AvailableFeatures=rg_lame-link",
             "ActiveFeatures=rg_lame-link")
    try:
        four = slurm.sbatch(*gang(4, 3), args=("60",))  # fits the free leaf only with the lame node
        wait_for(lambda: d.explain(four).get("reason") == "quarantined", 20,
                 "the 4-node gang to wait as quarantined")
        time.sleep(3 * CYCLE_S)
        assert slurm.show(four)["JobState"] == "PENDING"
        slurm.sl("scancel", four)
        three = slurm.sbatch(*gang(3, 3), args=("60",))
        wait_for(lambda: running_on(slurm, three), 30, "the 3-node gang to start")
        assert running_on(slurm, three) == healthy
        one = slurm.sbatch("-N1", "--gres=gpu:8", "--comment=rg:parallel=tp8;class=3", args=("60",))
        wait_for(lambda: running_on(slurm, one), 30, "the one-node job to start")
        assert running_on(slurm, one) == [lame]  # the only free node: single-node work may use it
        starts = [c for c in d.cycles() if c["failed"]]
        assert starts == [], starts
    finally:
        slurm.sl("scontrol", "update", f"nodename={lame}", "AvailableFeatures=", "ActiveFeatures=",
                 check=False)
    assert "rg_lame-link" not in slurm.sl("sinfo", "-h", "-n", lame, "-o", "%f").stdout


def test_fifo_starts_waiting_jobs_in_submit_order(slurm: Cluster, daemon: Start) -> None:
    """With daemon.policy=fifo and a full cluster, the waiting jobs start in submit order, even
    where a later, smaller job would fit sooner (strict FIFO blocks behind the head)."""
    daemon(daemon__policy="fifo", daemon__preempt="false")
    full = slurm.sbatch("-N16", "--gres=gpu:8", args=("8",))  # plain Slurm fills the cluster
    wait_for(lambda: running_on(slurm, full), 30, "the filler to run")
    sizes = [12, 8, 1, 16, 2, 4]  # nodes; 1 would fit beside 12 but must wait for 8
    waiting = []
    for n in sizes:
        waiting.append(slurm.sbatch(*gang(n, 3), args=("5",)))
        time.sleep(1.1)  # distinct submit seconds: FIFO's key is the submit time, then the id
    wait_for(lambda: slurm.finished(waiting), 150, "every waiting job to finish")
    runs = {r.job_id: r for r in slurm.runs(waiting)}
    assert all(runs[j].state == "COMPLETED" for j in waiting), runs
    starts = [runs[j].start for j in waiting]
    assert all(s is not None for s in starts)
    assert starts == sorted(starts), list(zip(sizes, starts, strict=True))  # type: ignore[arg-type]
    first = runs[waiting[0]]
    assert first.start is not None and first.start >= (slurm.runs([full])[0].end or 0)
