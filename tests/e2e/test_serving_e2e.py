"""Serving beside training through a compressed day, end to end (issue 19 item 5): the real
``railgang daemon run`` with a serving deployment on two nodes of the session's Slurm cluster, a
replica declared by its sbatch hint, and an elastic trainer that borrows the idle pool overnight.

The day is 70 seconds: demand is 0 replicas until RAMP, 1 from RAMP to DROP, 0 after; a replica
takes SWITCH_IN_S to warm up. The forecast holds (the forecast is the demand file itself), so:
the replica starts at least a switch-in before the ramp; the borrower shrinks in place (no
restart) at the take-back; after the drop the replica is drained and the pool's GPUs return to
training; and ``railgang explain`` says when the borrower was expected to give the nodes back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import hostlist
import pytest

from tests.e2e.conftest import Cluster, Daemon, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# wall seconds after the daemon's origin: the trainer borrows the pool some 20 s before the
# take-back (RAMP - SWITCH_IN_S - MARGIN_S); the replica serves from then until DROP
RAMP, DROP = 45.0, 70.0
SWITCH_IN_S, MARGIN_S = 15.0, 10.0
STARTUP_S = 15  # the day begins this long after the file is written: the daemon's start-up


def running_on(slurm: Cluster, job: str) -> list[str]:
    fields = slurm.show(job)
    if fields.get("JobState") != "RUNNING":
        return []
    return list(hostlist.expand_hostlist(fields["NodeList"]))


def started_at(slurm: Cluster, job: str) -> float:
    """When ``job`` first started, from sacct: slurmctld sends the start to slurmdbd
    asynchronously, so a job squeue shows running may not be in sacct yet (seen on 24.11)."""
    starts: list[float] = []

    def recorded() -> bool:
        starts[:] = [r.start for r in slurm.runs([job]) if r.start is not None]
        return bool(starts)

    wait_for(recorded, 120, f"sacct to record job {job}'s start")  # CI's 24.11: more than 60 s once
    return min(starts)


def test_a_compressed_day_replica_ahead_of_the_ramp_borrower_shrinks_gpus_return(
        slurm: Cluster, daemon: Callable[..., Daemon]) -> None:
    filler = slurm.sbatch("-N12", "--gres=gpu:8", args=("400",))  # plain Slurm: 12 of 16 nodes
    wait_for(lambda: running_on(slurm, filler), 30, "the filler to run")
    free = sorted(set(slurm.leaves()) - set(running_on(slurm, filler)))
    assert len(free) == 4
    pool = free[2:]
    # beside the heartbeat: the daemon's own user reads it there (pytest's tmp_path is private)
    demand = slurm.cluster.spec.heartbeat_file.parent / "serving-demand.csv"
    origin = int(time.time()) + STARTUP_S
    demand.write_text("time_s,deployment,replicas,tp,max_replicas,switch_in_s\n"
                      f"0,chat,0,8,1,{SWITCH_IN_S:g}\n{RAMP:g},chat,1,8,1,{SWITCH_IN_S:g}\n"
                      f"{DROP:g},chat,0,8,1,{SWITCH_IN_S:g}\n")
    status = slurm.cluster.spec.heartbeat_file.parent / "serving.json"
    status.unlink(missing_ok=True)
    try:
        # the shrink's notice (daemon.shrink_grace_s, else the preemption's 120 s) ends before
        # the trainer would: a job that ends first is not shrunk (elastic.outlasts_notice)
        d = daemon(daemon__policy="fifo", daemon__resize_min_interval_s="5",
                   slurm__resize_grace_s="3", daemon__shrink_grace_s="20", serving__enabled="true",
                   serving__demand_file=str(demand), serving__origin=str(origin),
                   serving__pools=json.dumps({"chat": hostlist.collect_hostlist(pool)}),
                   serving__margin_s=str(MARGIN_S), serving__drain_grace_s="3",
                   serving__step_s="1", serving__horizon_s="600")
        replica = slurm.sbatch("-N1", "--gres=gpu:8",
                               "--comment=rg:parallel=tp8,dp1;class=0;serving=chat", args=("600",))
        elastic = slurm.example("-N4", "--gres=gpu:8", "--rg-parallel=tp8,dp4",
                                "--rg-elastic=1:4", "--rg-class=3", steps=600, step_s=1.0,
                                check_every=2)
        # overnight: the replica waits (the forecast wants none), the trainer borrows the pool
        wait_for(lambda: running_on(slurm, elastic), 30, "the elastic trainer to start")
        assert sorted(running_on(slurm, elastic)) == free
        assert slurm.show(replica)["JobState"] == "PENDING"
        back = origin + RAMP - SWITCH_IN_S - MARGIN_S
        wait_for(lambda: "serving_lent" in json.dumps(d.explain(elastic)), 20,
                 "explain to show the borrowed nodes")
        lent = d.explain(elastic)["serving_lent"]
        # one replica takes one node back at the ramp; the other stays lent through the day
        times = sorted(lent.values(), key=lambda t: t is None)
        assert sorted(lent) == pool and abs(times[0] - back) < 2.0 and times[1] is None, lent
        # the take-back: a switch-in and the margin before the ramp, the trainer shrinks in place
        wait_for(lambda: running_on(slurm, replica), RAMP, "the replica to start")
        t_start = started_at(slurm, replica)
        assert back - 3.0 <= t_start <= origin + RAMP - SWITCH_IN_S, (t_start - origin)
        assert running_on(slurm, replica)[0] in pool
        wait_for(lambda: "resized: 4 -> " in slurm.output(elastic), 30, "the shrink to reach it")
        # after the drop: the replica is drained (requeued, waiting unseen), the pool lent again
        wait_for(lambda: slurm.show(replica).get("Restarts") == "1", DROP - RAMP + 40,
                 "the replica to be drained after the drop")
        assert time.time() >= origin + DROP
        def deployment() -> dict[str, Any]:
            return dict(json.loads(status.read_text())["deployments"][0])

        wait_for(lambda: len(deployment()["lent"]) == 2 and deployment()["queued"] == 1, 30,
                 "both pool nodes lent again and the requeued replica queued unseen")
        got = deployment()
        assert (got["target"], got["running"], got["unforecast"]) == (0, 0, 0)
        assert slurm.show(replica)["JobState"] == "PENDING"  # not restarted by Slurm either
        drained = [j for j, state, _ in d.journal("preempt") if state == "applied"]
        assert drained == [replica]  # the trainer was never preempted
    finally:
        status.unlink(missing_ok=True)
        demand.unlink(missing_ok=True)
