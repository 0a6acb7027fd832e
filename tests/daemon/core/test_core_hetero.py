"""Heterogeneity-aware allocation in the core (daemon/core/model/pools.py): pools, per-type speed,
who gets the fast GPUs, gangs that never span pools, and the type-blind baseline."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from railgang.daemon.core.cycle import decide
from railgang.daemon.core.model import pools as hetero
from railgang.daemon.core.model.actions import Start
from railgang.daemon.core.model.job import Job, JobRequest, JobState, RunningJob
from railgang.daemon.core.model.needs import GpuFacts
from railgang.daemon.core.model.snapshot import Node, Snapshot, make_snapshot
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import Fabric, NodeFacts
from tests.daemon.core.core_builders import first_fit

RESNET = {"v100": 1.0, "p100": 0.5, "k80": 0.1}  # gains 10x from a V100
LSTM = {"v100": 1.0, "p100": 0.8, "k80": 0.6}  # gains 1.7x


def cluster(**pools: int) -> tuple[Fabric, list[Node]]:
    """One 4-GPU node per count/4 of each type, each type under its own leaf."""
    leaves: dict[str, list[str]] = {}
    facts: dict[str, NodeFacts] = {}
    nodes: list[Node] = []
    for gpu_type, gpus in pools.items():
        for i in range(gpus // 4):
            name = f"{gpu_type}-{i}"
            leaves.setdefault(f"leaf-{gpu_type}", []).append(name)
            facts[name] = NodeFacts(name, 4, gpu_type)
            nodes.append(Node(name, 4, facts=GpuFacts(gpu_type=gpu_type)))
    return Fabric({"core": list(leaves)}, leaves, facts), nodes


def job(job_id: str, gpus: int = 1, rates: dict[str, float] | None = None, work: float = 3600.0,
        t: float = 0.0) -> Job:
    return Job(JobRequest(job_id, gpus, submit_time=t, type_rates=rates),
               JobState(work_remaining_s=work))


def snap(fabric: Fabric, nodes: list[Node], pending: list[Job], running: Any = ()) -> Snapshot:
    return make_snapshot(now=0.0, fabric=fabric, nodes=nodes, pending=pending, running=running)


def starts(s: Snapshot, policy: str = "default", **params: Any) -> dict[str, str]:
    """job id -> GPU type it started on."""
    d = decide(s, get(policy, **params), 0.0, random.Random(0))
    out = {}
    for a in d.of(Start):
        assert isinstance(a, Start)
        types = {s.nodes[n].facts.gpu_type for n in a.assignment}
        assert len(types) == 1, f"{a.job_id} spans GPU types {types}"
        out[a.job_id] = types.pop()
    return out


def test_type_rate_measured_then_table_then_one() -> None:
    j = job("a", rates={"v100": 1.0, "k80": 0.3})
    assert hetero.type_rate(j, "k80") == 0.3
    assert hetero.type_rate(j, "p100") == hetero.TYPE_SPEED["p100"]
    assert hetero.type_rate(job("b"), "h100") == hetero.TYPE_SPEED["h100"]
    assert hetero.type_rate(job("b"), "gpu") == 1.0  # an untyped pool: no opinion


def test_the_fast_gpus_go_to_the_job_that_gains_most_from_them() -> None:
    fabric, nodes = cluster(v100=4, k80=4)
    # the LSTM is first in line (submitted first) but loses little on a K80
    pending = [job(f"lstm{i}", rates=LSTM, t=i) for i in range(4)] + \
              [job(f"resnet{i}", rates=RESNET, t=10 + i) for i in range(4)]
    got = starts(snap(fabric, nodes, pending))
    assert {got[f"resnet{i}"] for i in range(4)} == {"v100"}
    assert {got[f"lstm{i}"] for i in range(4)} == {"k80"}


def test_type_blind_fills_the_pool_with_the_most_free_gpus() -> None:
    fabric, nodes = cluster(v100=4, k80=8)
    pending = [job("resnet", rates=RESNET)]
    assert starts(snap(fabric, nodes, pending), hetero=False) == {"resnet": "k80"}
    assert starts(snap(fabric, nodes, pending)) == {"resnet": "v100"}


def test_a_gang_never_spans_pools() -> None:
    fabric, nodes = cluster(v100=4, k80=4)
    s = snap(fabric, nodes, [job("big", gpus=8, rates=LSTM)])
    d = decide(s, get("default"), 0.0, random.Random(0))
    assert not d.of(Start)  # 8 GPUs are free, but 4 of each type
    assert d.reason("big") is not None


def test_a_long_job_waits_for_the_fast_pool_rather_than_crawl_on_the_slow_one() -> None:
    fabric, nodes = cluster(v100=4, k80=4)
    busy = RunningJob(job("r", gpus=4, rates=RESNET, work=3600.0), {"v100-0": (0, 1, 2, 3)}, 0.0, 4)
    long = job("long", rates=RESNET, work=100 * 3600.0)  # 1,000 h on a K80, 101 h via the V100
    short = job("short", rates=RESNET, work=60.0, t=1.0)  # 10 min on a K80 beats waiting 1 h
    got = starts(snap(fabric, nodes, [long, short], running=[busy]))
    assert got == {"short": "k80"}


def test_one_pool_leaves_the_plan_untouched() -> None:
    fabric, nodes = cluster(v100=8)
    s = snap(fabric, nodes, [job("a", rates=RESNET), job("b", rates=LSTM)])
    plan = get("default", hetero=False).plan(s, 0.0)
    assert hetero.aware(plan, s) == plan
    assert not hetero.pools_of(s).mixed


@pytest.mark.parametrize("policy", ["default", "fifo"])
def test_every_start_on_a_mixed_cluster_stays_in_one_pool(policy: str) -> None:
    rng = random.Random(7)
    fabric, nodes = cluster(v100=8, p100=8, k80=8)
    for trial in range(20):
        pending = [job(f"j{trial}-{i}", gpus=rng.choice((1, 2, 4)),
                       rates={"v100": 1.0, "p100": rng.uniform(0.4, 1), "k80": rng.uniform(0.1, 0.6)},
                       work=rng.uniform(60, 36000), t=i) for i in range(12)]
        for blind in (False, True):
            starts(snap(fabric, nodes, pending), policy, hetero=not blind)  # asserts one type


def _pool_placer(fabric: Any, free: Any, spec: Any, *, health: Any = None, seed: int = 0) -> Any:
    """The tests' first-fit placer, honouring ``GangRequest.nodes`` as the real one does."""
    if spec.nodes is not None:
        free = {n: g for n, g in free.items() if n in spec.nodes}
    return first_fit(fabric, free, spec, health=health, seed=seed)


@pytest.mark.parametrize("policy", ["default", "fifo", "tiresias", "themis", "pollux", "slurm"])
def test_contract_invariants_hold_on_random_mixed_clusters(policy: str) -> None:
    """The shared contract's snapshots, with each node given a random GPU type and tier: every
    invariant of check_decision holds, and every start or move stays in one pool."""
    from railgang.daemon.core.cycle import CycleConfig
    from railgang.daemon.core.model.actions import Migrate
    from railgang.daemon.core.model.tiers import TierTerms
    from tests.daemon.core.core_invariants import check_decision, random_snapshot

    tiers = {"spot": TierTerms({"": 0.7}, 2.0, 120.0), "on-demand": TierTerms({"": 2.0})}
    moved = 0
    for seed in range(40):
        base = random_snapshot(seed)
        rng = random.Random(seed)
        nodes = {n: dataclasses.replace(node, facts=GpuFacts(gpu_type=rng.choice(("v100", "k80"))),
                                        tier=rng.choice(("on-demand", "spot")))
                 for n, node in base.nodes.items()}
        rates = {j.job_id: {"v100": 1.0, "k80": rng.uniform(0.1, 0.9)} for j in base.pending}
        pending = [Job(dataclasses.replace(j.request, type_rates=rates[j.job_id]), j.state)
                   for j in base.pending]
        snap = base.replace(nodes=nodes, pending=tuple(pending), tiers=tiers)
        d = decide(snap, get(policy), snap.now, random.Random(0), placer=_pool_placer,
                   config=CycleConfig())
        check_decision(snap, d)
        for a in d.actions:
            if isinstance(a, Start | Migrate):
                pools = {(nodes[n].facts.gpu_type, nodes[n].tier) for n in a.assignment}
                assert len(pools) == 1, f"{a.job_id} spans pools {pools}"
                moved += isinstance(a, Migrate)
    assert (moved > 0) is (policy != "slurm")  # upgrades only for plans placed by type
