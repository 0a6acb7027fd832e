"""Needs on a cluster of more than one GPU type (issue 13 gaps): a needs job's reason stays about
its needs, backfill reserves on the GPUs that meet them, and the needs API is public."""

from __future__ import annotations

import random

from railgang.daemon.core import Node, Reason, RunningJob, Start, decide, make_snapshot
from railgang.daemon.core.model.needs import GpuFacts, parse_needs
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.core.core_builders import job

A100 = GpuFacts("a100", 80.0, True, "ib", (8, 0))
V100 = GpuFacts("v100", 32.0, False, "eth", (7, 0))
BIG_MEM = parse_needs("gpumem>=40G")


def _mixed(running: list[tuple[int, float]], *pending: object):  # type: ignore[no-untyped-def]
    """4 nodes x 8 GPUs: n1-n2 A100 80 GB, n3-n4 V100 32 GB (two GPU types: two pools);
    ``running``: (node index, work left s) of one 8-GPU job holding that node."""
    fabric = fabric_from_shape(4, 8, 2)
    names = list(fabric.nodes)
    nodes = [Node(n, 8, facts=A100 if i < 2 else V100) for i, n in enumerate(names)]
    runs = [RunningJob(job(f"r{i}").gpus(8).work(left).build(), {names[i]: tuple(range(8))}, 0.0, 8)
            for i, left in running]
    snap = make_snapshot(now=0.0, fabric=fabric, nodes=nodes, running=runs,
                         pending=[p.build() for p in pending])  # type: ignore[attr-defined]
    return names, snap


def _starts(d: object) -> dict[str, set[str]]:
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}  # type: ignore[attr-defined]


def test_mixed_types_busy_eligible_pool_waits_as_no_eligible_capacity() -> None:
    # the A100s are busy, the V100s free: enough free GPUs, none that meet the need. On one GPU
    # type this is no_eligible_capacity; two types must not turn it into waiting_for_gpus
    _, snap = _mixed([(0, 3600.0), (1, 3600.0)], job("big").gpus(8).with_(needs=BIG_MEM))
    reason = decide(snap, get("fifo"), 0.0, random.Random(0)).reason("big")
    assert reason is not None and reason.code is Reason.NO_ELIGIBLE_CAPACITY
    assert "gpumem>=40G" in reason.detail


def test_mixed_types_need_no_node_meets_stays_needs_unmet() -> None:
    _, snap = _mixed([], job("h").gpus(8).with_(needs=parse_needs("type=h100")))
    reason = decide(snap, get("fifo"), 0.0, random.Random(0)).reason("h")
    assert reason is not None and reason.code is Reason.NEEDS_UNMET


def test_mixed_types_without_needs_still_waits_for_gpus() -> None:
    # 4 + 4 free GPUs in two pools: an 8-GPU gang never spans pools, and has no needs to blame
    _, snap = _mixed([(0, 3600.0), (2, 3600.0)], job("j").gpus(16))
    reason = decide(snap, get("fifo"), 0.0, random.Random(0)).reason("j")
    assert reason is not None and reason.code is Reason.WAITING_FOR_GPUS


def test_backfill_reserves_on_the_gpus_that_meet_the_needs() -> None:
    # one A100 node busy until t=1000, one V100 node busy until t=100, one of each free. The
    # 16-GPU big-memory job can start only when the A100 frees (t=1000): counting every GPU says
    # 16 are free now (shadow t=0, nothing spare) and holds back a short job that ends first
    _, snap = _mixed([(0, 1000.0), (2, 100.0)],
                         job("big").gpus(16).with_(needs=BIG_MEM),
                         job("short").gpus(8).work(500.0).at(1))
    d = decide(snap, get("slurm"), 0.0, random.Random(0))
    reason = d.reason("big")
    assert reason is not None and reason.code is Reason.RESERVED
    assert reason.detail == "reserved start at t=1000"
    assert "short" in _starts(d)


def test_backfill_still_refuses_a_job_that_would_delay_the_reserved_start() -> None:
    # the same, but the waiting job runs past t=1000 on the only A100 node free: it would delay
    # the reservation, unless it goes to the V100 node the big job cannot use
    _, snap = _mixed([(0, 1000.0), (2, 100.0)],
                         job("big").gpus(16).with_(needs=BIG_MEM),
                         job("long").gpus(8).work(5000.0).at(1).with_(needs=BIG_MEM))
    d = decide(snap, get("slurm"), 0.0, random.Random(0))
    assert "long" not in _starts(d)


def test_needs_are_part_of_the_public_core() -> None:
    import railgang.daemon.core as core

    for name in ("Needs", "GpuFacts", "NeedsError", "parse_needs", "needs"):
        assert name in core.__all__ and getattr(core, name) is not None
    assert core.parse_needs("nvlink") == core.Needs(nvlink=True)


def test_a_long_job_backfills_on_gpus_the_reserved_job_cannot_use() -> None:
    # it outlasts the reservation, but the V100 node it may use is one the big job never will
    names, snap = _mixed([(0, 1000.0), (2, 100.0)],
                         job("big").gpus(16).with_(needs=BIG_MEM),
                         job("long").gpus(8).work(5000.0).at(1))
    d = decide(snap, get("slurm"), 0.0, random.Random(0))
    assert _starts(d).get("long") == {names[3]}
    reason = d.reason("big")
    assert reason is not None and reason.detail == "reserved start at t=1000"


# ---- a running job leaves spot when its predicted interruptions make spot dearer (part 3) ------
def _spot(held: dict[str, int], running_on_demand: bool = False, **job_kw: object):  # type: ignore[no-untyped-def]
    """2 on-demand + 3 spot V100 nodes of 4 GPUs; one 8-GPU job holding ``held`` spot GPUs per
    node; spot reclaims 1.5 per node-day (cap: 4 a day for jobs of 8 GPUs and up)."""
    from railgang.daemon.core.model.tiers import ON_DEMAND, SPOT, TierTerms
    from railgang.topology.fabric import Fabric, NodeFacts

    names = {"od1": ON_DEMAND, "od2": ON_DEMAND, "sp1": SPOT, "sp2": SPOT, "sp3": SPOT}
    leaves = {"leaf-od": ["od1", "od2"], "leaf-sp": ["sp1", "sp2", "sp3"]}
    fabric = Fabric({"core": list(leaves)}, leaves, {n: NodeFacts(n, 4, "v100") for n in names})
    nodes = [Node(n, 4, facts=GpuFacts("v100"), tier=t) for n, t in names.items()]
    b = job("j").gpus(8).work(20 * 3600.0)
    for k, v in job_kw.items():
        b = b.with_(**{k: v})
    runs = [RunningJob(b.build(), {n: tuple(range(g)) for n, g in held.items()}, 0.0, 8)]
    if running_on_demand:
        runs.append(RunningJob(job("od").gpus(8).work(3600.0).build(),
                               {"od1": (0, 1, 2, 3), "od2": (0, 1, 2, 3)}, 0.0, 8))
    tiers = {ON_DEMAND: TierTerms({"v100": 2.48}), SPOT: TierTerms({"v100": 0.87}, 1.5, 120.0)}
    return make_snapshot(now=7200.0, fabric=fabric, nodes=nodes, running=runs).replace(tiers=tiers)


def _migrations(snap: object) -> dict[str, set[str]]:
    from railgang.daemon.core import Migrate

    d = decide(snap, get("default"), 7200.0, random.Random(0))  # type: ignore[arg-type]
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Migrate)}


def test_a_gang_scattered_over_spot_nodes_moves_to_free_on_demand() -> None:
    # 8 GPUs over 3 spot nodes: 4.5 predicted reclaims a day, over the cap of 4 that routing
    # applied to the 2 nodes it asked for; on-demand is free, so it moves there (checkpoint + requeue)
    assert _migrations(_spot({"sp1": 3, "sp2": 3, "sp3": 2})) == {"j": {"od1", "od2"}}


def test_a_job_within_the_cap_stays_on_spot_and_nothing_moves_onto_busy_on_demand() -> None:
    assert _migrations(_spot({"sp1": 4, "sp2": 4})) == {}  # 3 a day: spot stays cheaper
    assert _migrations(_spot({"sp1": 3, "sp2": 3, "sp3": 2}, running_on_demand=True)) == {}


def test_simulator_moves_a_scattered_spot_gang_to_on_demand_once_it_frees() -> None:
    # 12 on-demand + 12 spot V100 GPUs (4-GPU nodes), 1.5 reclaims per spot node-day. "od" holds
    # all on-demand (12 GPUs on 3 nodes: 4.5 a day, over the cap: never spot) until t=4320; small
    # jobs leave 2+3+4 spot GPUs free at t=3000, so "j" (8 GPUs: 2 nodes, 3 a day, allowed) starts
    # scattered over 3 spot nodes: 4.5 a day. When on-demand frees it checkpoints and moves there
    from railgang.daemon.sim.backend import SimConfig
    from railgang.daemon.sim.engine import EngineConfig, simulate
    from railgang.daemon.sim.pools import mixed_cluster, parse_pools
    from railgang.daemon.sim.traces.model import TraceJob

    h = 3600.0
    cluster = mixed_cluster(parse_pools("v100=12,v100:spot=12", 4), 4, 1, spot_per_node_day=1.5)
    jobs = [TraceJob(job_id=i, submit_time=t, gpus=g, duration_s=d) for i, t, d, g in [
        ("od", 0.0, 1.2 * h, 12), ("f1", 0.0, 30 * h, 2), ("f2", 1.0, 0.5 * h, 3),
        ("f3", 2.0, 30 * h, 1), ("j", 3000.0, 20 * h, 8)]]
    config = EngineConfig(sim=SimConfig(node_tier=cluster.node_tier, tiers=cluster.tiers), seed=0)
    rec = {r.job_id: r for r in simulate(jobs, get("default"), cluster.fabric, config=config).records}
    j = rec["j"]
    assert j.preemptions - j.interruptions == 1  # one move by railgang, not a reclaim
    assert j.pool_gpu_s["v100:spot"] < 8 * 0.5 * h < j.pool_gpu_s["v100:on-demand"]
    assert set(rec["f1"].pool_gpu_s) == {"v100:spot"}  # small jobs stay on cheap spot
