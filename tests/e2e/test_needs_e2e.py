"""Needs, not SKUs, end to end (issue 13 parts 1 and 4): a mixed-pool cluster (4 A100 80 GB NVLink
IB nodes, 4 V100 32 GB Ethernet nodes: typed GRES and node features) brought up by the devcluster
code, the real ``railgang daemon run`` placing hinted jobs, and the user's view (sbatch, squeue,
scontrol, ``railgang explain``).

The cluster is this module's own (its own directory and ports, no accounting), so the session's
16-node cluster stays untyped for every other test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import hostlist
import pytest

from railgang.devcluster.cluster import DevCluster
from railgang.devcluster.layout import ClusterSpec, parse_pools
from tests.conftest import TEST_ROOT, real_cluster
from tests.e2e.conftest import Cluster, Daemon, user_view, wait_for
from tests.support.ports import PORT_BASE

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

A100 = [f"n0{i}" for i in range(1, 5)]
V100 = [f"n0{i}" for i in range(5, 9)]
BIG = "--rg-needs=gpumem>=40G"


@pytest.fixture(scope="module")
def mixed() -> Iterator[DevCluster]:
    # with accounting: the daemon runs as its own non-root user, whose Slurm admin level lives in
    # slurmdbd (without it only root and SlurmUser may act on other users' jobs)
    spec = ClusterSpec(dir=TEST_ROOT / "devcluster-mixed", cluster_name="rgmixed", accounting=True,
                       slurmctld_port=PORT_BASE + 700, slurmdbd_port=PORT_BASE + 702,
                       mariadb_port=PORT_BASE - 400, slurmd_base_port=PORT_BASE + 710,
                       nodes_per_leaf=4).with_pools(parse_pools("a100=4,v100=4"))
    yield from real_cluster(spec)


@pytest.fixture
def slurm(mixed: DevCluster, tmp_path: Path) -> Iterator[Cluster]:
    yield from user_view(mixed, tmp_path)


def start_daemon(slurm: Cluster, daemon: Callable[..., Daemon]) -> Daemon:
    """The e2e conftest's daemon (on this module's mixed cluster), keeping the fleet file current."""
    return daemon(slurm__fleet_file=slurm.cluster.spec.gpu_fleet_file, daemon__policy="default")


def nodes_of(slurm: Cluster, job: str) -> list[str]:
    fields = slurm.show(job)
    if fields.get("JobState") != "RUNNING":
        return []
    return list(hostlist.expand_hostlist(fields["NodeList"]))


def test_mixed_pools_register_typed_gres_and_features(slurm: Cluster) -> None:
    out = slurm.sl("sinfo", "-h", "-N", "-o", "%N %G %b").stdout.split("\n")
    rows = dict((line.split(" ", 1)[0], line.split(" ", 1)[1]) for line in out if line.strip())
    assert {rows[n] for n in A100} == {"gpu:a100:8 gpumem_80g,nvlink,ib"}
    assert {rows[n] for n in V100} == {"gpu:v100:8 gpumem_32g,eth"}
    fleet = slurm.cluster.spec.gpu_fleet_file.read_text().splitlines()[1:]
    assert fleet == ["n[01-04] nodes=4 gpus=8 type=a100 gpumem=80 nvlink=1 net=ib cc=8.0",
                     "n[05-08] nodes=4 gpus=8 type=v100 gpumem=32 nvlink=0 net=eth cc=7.0"]


def test_an_impossible_need_is_refused_at_submit_with_what_exists(slurm: Cluster) -> None:
    base = ("sbatch", "--account=team-a", "--gres=gpu:8", "--output=/dev/null", "--wrap=sleep 1")
    res = slurm.sl(*base, "--rg-needs=gpumem>=100G,nvlink", check=False)
    assert res.returncode != 0
    assert ("railgang: --rg-needs=gpumem>=100G,nvlink: no node meets it; the cluster has "
            "n[01-04] (4 x 8 GPUs a100 80G nvlink ib cc8.0); n[05-08] (4 x 8 GPUs v100 32G eth cc7.0)"
            ) in res.stderr
    res = slurm.sl(*base[:-1], "-N5", "--rg-needs=nvlink", "--wrap=sleep 1", check=False)
    assert res.returncode != 0 and "only 32 GPUs meet it, the job asks for 40" in res.stderr
    res = slurm.sl(*base, "--rg-needs=gpumem>40G", check=False)
    assert res.returncode != 0 and "'gpumem>40g' is not a need; needs are type=" in res.stderr
    res = slurm.sl(*base, "--comment=rg:class=3;needs=type=h100", check=False)  # the comment form
    assert res.returncode != 0 and "--rg-needs=type=h100: no node meets it" in res.stderr


def test_big_memory_jobs_land_only_on_the_a100_pool_and_small_work_backfills_the_v100s(
        slurm: Cluster, daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(slurm, daemon)
    wait_for(lambda: slurm.cluster.spec.gpu_fleet_file.stat().st_mtime > 0, 10, "the fleet file")
    big = [slurm.sbatch("-N2", "--gres=gpu:8", BIG, args=("120",)) for _ in range(2)]
    wait_for(lambda: all(nodes_of(slurm, j) for j in big), 60, "the two big-memory gangs to start")
    assert sorted(n for j in big for n in nodes_of(slurm, j)) == A100  # the V100s were free too
    started = {job for job, state, _ in d.journal("start") if state == "applied"}
    assert set(big) <= started  # the daemon placed them (ended their lease), not plain Slurm
    waiting = slurm.sbatch("-N1", "--gres=gpu:8", BIG, args=("60",))
    small = slurm.sbatch("-N1", "--gres=gpu:8", "--comment=rg:class=3", args=("60",))
    wait_for(lambda: nodes_of(slurm, small), 60, "the small job to backfill the idle V100 pool")
    assert nodes_of(slurm, small)[0] in V100
    wait_for(lambda: d.explain(waiting).get("reason") in ("no_eligible_capacity", "waiting_for_gpus",
                                                           "reserved", "priority"),
             20, "the third big-memory job to wait for the A100 pool")
    assert slurm.show(waiting)["JobState"] == "PENDING"  # 24 V100 GPUs idle, none of them eligible
    slurm.sl("scancel", big[0])
    wait_for(lambda: nodes_of(slurm, waiting), 60, "the waiting big-memory job to start on a freed A100")
    assert nodes_of(slurm, waiting)[0] in A100
    fields = slurm.show(waiting)
    assert fields["ExcNodeList"] == "n[05-08]" and "needs=gpumem>=40G" in fields["AdminComment"]


def test_the_daemon_rewrites_the_fleet_file_when_a_node_changes(
        slurm: Cluster, daemon: Callable[..., Daemon]) -> None:
    """A V100 node gains NVLink in Slurm (features changed by an admin): within a cycle the daemon
    rewrites the fleet file, and job_submit.lua's next answer follows it."""
    fleet = slurm.cluster.spec.gpu_fleet_file
    before = fleet.read_text()
    start_daemon(slurm, daemon)
    feats = "gpumem_32g,eth,nvlink"
    slurm.sl("scontrol", "update", "nodename=n08", f"AvailableFeatures={feats}", f"ActiveFeatures={feats}")
    try:
        wait_for(lambda: "n08 nodes=1 gpus=8 type=v100 gpumem=32 nvlink=1 net=eth" in fleet.read_text(),
                 20, "the daemon to rewrite the fleet file")
        assert "n[05-07] nodes=3 gpus=8 type=v100 gpumem=32 nvlink=0" in fleet.read_text()
        res = slurm.sl("sbatch", "--account=team-a", "--gres=gpu:8", "--hold", "--output=/dev/null",
                       "--parsable", "--rg-needs=type=v100,nvlink", "--wrap=true")
        slurm.jobs.append(res.stdout.strip())
        assert slurm.show(slurm.jobs[-1])["ExcNodeList"] == "n[01-07]"
    finally:
        feats = "gpumem_32g,eth"
        slurm.sl("scontrol", "update", "nodename=n08", f"AvailableFeatures={feats}", f"ActiveFeatures={feats}")
        wait_for(lambda: fleet.read_text() == before, 20, "the fleet file to be restored")
