"""decide(): the recipe, reasons as data, class ordering, quota, strict/backfill/greedy modes."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core import Account, Decision, Reason, Start, decide
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies.registry import get
from tests.daemon.core.core_builders import cluster, first_fit, job


def run(snap: Snapshot, policy: str = "fifo", now: float | None = None) -> Decision:
    return decide(snap, get(policy), snap.now if now is None else now, random.Random(0), placer=first_fit)


def started(d: Decision) -> list[str]:
    return [a.job_id for a in d.actions if isinstance(a, Start)]


def test_fifo_starts_in_order_and_blocks_at_the_head() -> None:
    snap = (cluster(2).running(job("r").gpus(8).work(100))
            .pending(job("a").gpus(8).at(1), job("b").gpus(16).at(2), job("c").gpus(4).at(3)).build())
    d = run(snap)
    assert started(d) == ["a"]
    assert d.reason("b").code is Reason.WAITING_FOR_GPUS  # type: ignore[union-attr]
    assert d.reason("c").code is Reason.PRIORITY  # type: ignore[union-attr]


def test_every_pending_job_gets_exactly_one_reason_or_a_start() -> None:
    snap = cluster(1).pending(*(job(f"j{i}").gpus(4).at(i) for i in range(5))).build()
    d = run(snap)
    ids = started(d) + [r.job_id for r in d.reasons]
    assert sorted(ids) == [f"j{i}" for i in range(5)]


@pytest.mark.parametrize(
    ("gpus", "code"),
    [(64, Reason.LARGER_THAN_CLUSTER), (12, Reason.WAITING_FOR_GPUS)],
    ids=["larger-than-cluster", "waits"],
)
def test_too_large_jobs_are_rejected_with_a_reason_not_a_hang(gpus: int, code: Reason) -> None:
    snap = cluster(2).running(job("r").gpus(8)).pending(job("big").gpus(gpus)).build()
    d = run(snap)
    assert d.reason("big").code is code  # type: ignore[union-attr]


def test_larger_than_cluster_does_not_block_fifo() -> None:
    snap = cluster(1).pending(job("big").gpus(64).at(0), job("small").gpus(2).at(1)).build()
    assert started(run(snap)) == ["small"]


def test_quota_holds_the_job_with_a_quota_reason() -> None:
    snap = (cluster(2).accounts(Account("ml", quota_gpus=8)).running(job("r").gpus(8).account("ml"))
            .pending(job("q").gpus(4).account("ml"), job("o").gpus(4).at(1)).build())
    d = run(snap, "fifo")
    assert d.reason("q").code is Reason.QUOTA  # type: ignore[union-attr]
    assert started(d) == ["o"]


def test_higher_class_goes_first_whatever_the_policy_order() -> None:
    snap = cluster(1).pending(job("batch").gpus(8).at(0).cls(3), job("prod").gpus(8).at(5).cls(1)).build()
    assert started(run(snap)) == ["prod"]


def test_decide_is_deterministic() -> None:
    snap = cluster(4).pending(*(job(f"j{i}").gpus(1 + i % 8).at(i) for i in range(20))).build()
    assert run(snap) == run(snap)


def test_quarantined_nodes_are_tagged_once() -> None:
    from railgang.daemon.core import TagNode
    from railgang.topology.health import LinkHealth

    snap = cluster(2).build().replace(health=LinkHealth(quarantined={"n001": "crc errors"}))
    d = run(snap)
    assert d.actions == (TagNode("n001", "lame-link"),)
    tagged = snap.replace(nodes={**snap.nodes, "n001": snap.nodes["n001"].__class__(
        "n001", 8, tags=frozenset({"lame-link"}))})
    assert run(tagged).actions == ()


def test_priorities_can_be_emitted_in_final_order() -> None:
    from railgang.daemon.core import CycleConfig, SetPriority

    snap = cluster(1).running(job("r").gpus(8)).pending(job("a").gpus(8).at(0), job("b").gpus(8).at(1)).build()
    d = decide(snap, get("fifo"), 0.0, random.Random(0), placer=first_fit,
               config=CycleConfig(emit_priorities=True))
    assert [a for a in d.actions if isinstance(a, SetPriority)] == [SetPriority("a", 2), SetPriority("b", 1)]


def test_a_lame_link_tag_alone_keeps_multi_node_gangs_off_the_node() -> None:
    """The tag (a Slurm node feature) is the quarantine a restarted daemon finds, without any
    link health data: gangs avoid the node, a one-node job may still use it, no TagNode again."""
    from railgang.daemon.core import Node, TagNode, topology_placer
    from railgang.daemon.core.model.snapshot import make_snapshot
    from railgang.topology.fabric import fabric_from_shape

    fab = fabric_from_shape(8, 8, 4, prefix="n")  # two leaves of four nodes
    nodes = [Node(n, 8, tags=frozenset({"lame-link"}) if n == "n02" else frozenset()) for n in fab.nodes]
    busy = {n: frozenset() for n in ("n05", "n06", "n07", "n08")}  # only leaf s1 has room
    gang = job("gang").gpus(24).tp(8).at(0).build()
    one = job("one").gpus(8).tp(8).at(1).build()

    def starts(*pending: object) -> dict[str, set[str]]:
        snap = make_snapshot(now=0.0, fabric=fab, nodes=nodes, pending=pending,  # type: ignore[arg-type]
                             free={n: busy.get(n, frozenset(range(8))) for n in fab.nodes})
        d = decide(snap, get("fifo"), 0.0, random.Random(0), placer=topology_placer)
        assert not d.of(TagNode)  # already tagged: nothing to send again
        return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}

    assert starts(gang) == {"gang": {"n01", "n03", "n04"}}
    assert starts(job("big").gpus(32).tp(8).at(0).build()) == {}  # would need n02: waits
    free_only_n02 = {**busy, "n01": frozenset(), "n03": frozenset(), "n04": frozenset()}
    snap = make_snapshot(now=0.0, fabric=fab, nodes=nodes, pending=[one],
                         free={n: free_only_n02.get(n, frozenset(range(8))) for n in fab.nodes})
    d = decide(snap, get("fifo"), 0.0, random.Random(0), placer=topology_placer)
    assert [(a.job_id, set(a.assignment)) for a in d.actions if isinstance(a, Start)] == [("one", {"n02"})]
