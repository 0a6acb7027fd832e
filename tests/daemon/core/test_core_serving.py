"""Lent serving capacity in the core (issue 19 item 3; daemon/core/model/serving.py)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from railgang.daemon.core import (
    CycleConfig,
    Decision,
    GangRequest,
    Placed,
    Preempt,
    Reason,
    Resize,
    Start,
    Unplaceable,
    decide,
)
from railgang.daemon.core.model.serving import ServingPool
from railgang.daemon.core.model.snapshot import Snapshot
from tests.daemon.core.core_builders import ClusterB, cluster, first_fit, job

H = 3600.0
NOW = 10 * H
POOL = {"n002": "chat", "n003": "chat"}  # the last two of four 8-GPU nodes serve


def on_nodes(fabric: Any, free: Mapping[str, frozenset[int]], request: GangRequest, *,
             health: Any = None, seed: int = 0) -> Placed | Unplaceable:
    """First fit on the nodes the gang may use (the topology placer honours them too)."""
    allowed = (free if request.nodes is None
               else {n: g for n, g in free.items() if n in request.nodes})
    return first_fit(fabric, allowed, request, health=health, seed=seed)


def run(snap: Snapshot, name: str = "fifo") -> Decision:
    from railgang.daemon.core.policies.registry import get

    return decide(snap, get(name), snap.now, random.Random(0), placer=on_nodes,
                  config=CycleConfig())


def with_pool(c: ClusterB, lent: dict[str, float | None]) -> Snapshot:
    return c.build().replace(serving=ServingPool(MappingProxyType(POOL), MappingProxyType(lent)))


def training_full(c: ClusterB) -> ClusterB:
    """n000 and n001 busy with class-1 work: only the serving pool has free GPUs."""
    return c.running(job("p0").gpus(8).cls(1), job("p1").gpus(8).cls(1))


def starts(d: Decision) -> dict[str, tuple[str, ...]]:
    return {a.job_id: tuple(sorted(a.assignment)) for a in d.of(Start)}  # type: ignore[attr-defined]


@pytest.mark.parametrize(("cls", "elastic", "limit_h", "runs"), [
    (3, True, None, True),  # elastic batch borrows any lent node
    (3, False, 1.0, True),  # rigid batch that ends before the take-back (2 h away)
    (3, False, 4.0, False),  # rigid batch that would still run at the take-back
    (3, False, None, False),  # rigid batch without a time limit
    (2, True, None, False),  # interactive work never borrows
    (1, False, 1.0, False),  # production neither
], ids=["elastic", "rigid-short", "rigid-long", "rigid-unlimited", "class2", "class1"])
def test_lent_nodes_are_borrowed_by_class_3_only_elastic_first(
        cls: int, elastic: bool, limit_h: float | None, runs: bool) -> None:
    j = job("b").gpus(8).tp(8).cls(cls)
    j = j.elastic(1, 1) if not elastic else j.elastic(1, 2)
    j = j.gpus(8)
    if limit_h is not None:
        j = j.limit(limit_h * H)
    snap = with_pool(training_full(cluster(4).at(NOW)).pending(j),
                     {"n002": NOW + 2 * H, "n003": NOW + 2 * H})
    d = run(snap)
    assert ("b" in starts(d)) is runs
    if runs:
        assert set(starts(d)["b"]) <= {"n002", "n003"}


def test_a_node_without_an_expected_take_back_is_borrowable_by_rigid_batch() -> None:
    snap = with_pool(training_full(cluster(4).at(NOW)).pending(job("b").gpus(8).cls(3)),
                     {"n003": None})
    assert starts(run(snap)) == {"b": ("n003",)}


def test_held_pool_nodes_are_for_replicas_only() -> None:
    """Nothing is lent: batch waits although n002/n003 are idle; a replica starts there."""
    snap = with_pool(training_full(cluster(4).at(NOW))
                     .pending(job("b").gpus(8).cls(3), job("r").gpus(8).tp(8).cls(0)
                              .with_(serving="chat")), {})
    d = run(snap)
    assert starts(d) == {"r": ("n002",)}
    assert d.reason("b") is not None


def test_a_replica_never_runs_off_its_pool_nor_on_lent_nodes() -> None:
    """Training nodes are idle and the pool is all lent: the replica waits, saying why."""
    snap = with_pool(cluster(4).at(NOW).pending(job("r").gpus(8).tp(8).cls(0).with_(serving="chat")),
                     {"n002": None, "n003": None})
    d = run(snap)
    assert not d.of(Start)
    r = d.reason("r")
    assert r is not None and r.code == Reason.NEEDS_UNMET and "chat" in r.detail


def test_take_back_shrinks_elastic_borrowers_before_preempting_rigid_ones() -> None:
    """n003 was lent and is taken back (no longer lent): an elastic borrower holds half of it
    and a rigid one the other half... the elastic one shrinks off first; the rigid borrower on
    n002 (still lent) is untouched."""
    c = (training_full(cluster(4).at(NOW))
         .running(job("el").gpus(8).tp(4).elastic(1, 2).cls(3), on={"n002": (4, 5, 6, 7),
                                                                     "n003": (0, 1, 2, 3)},
                  start=NOW - H)
         .running(job("rigid").gpus(4).tp(4).cls(3), on={"n003": (4, 5, 6, 7)}, start=NOW - H)
         .running(job("other").gpus(4).tp(4).cls(3), on={"n002": (0, 1, 2, 3)}, start=NOW - H)
         .pending(job("r").gpus(4).tp(4).cls(0).with_(serving="chat")))
    d = run(with_pool(c, {"n002": None}))
    assert [a.job_id for a in d.of(Resize)] == ["el"]
    assert not d.of(Preempt)
    assert starts(d) == {"r": ("n003",)}


def test_take_back_preempts_a_rigid_borrower_when_no_elastic_one_can_shrink() -> None:
    c = (training_full(cluster(4).at(NOW))
         .running(job("rigid").gpus(8).tp(8).cls(3), on={"n003": tuple(range(8))}, start=NOW - H)
         .running(job("other").gpus(8).tp(8).cls(3), on={"n002": tuple(range(8))}, start=NOW - H)
         .pending(job("r").gpus(8).tp(8).cls(0).with_(serving="chat")))
    d = run(with_pool(c, {"n002": None}))
    assert [a.job_id for a in d.of(Preempt)] == ["rigid"]  # not "other" on the still-lent n002


def test_a_serving_replica_must_be_class_0() -> None:
    with pytest.raises(ValueError, match="class 0"):
        job("r").gpus(8).cls(3).with_(serving="chat").build()


def test_lent_nodes_must_belong_to_a_pool() -> None:
    with pytest.raises(ValueError, match="outside every serving pool"):
        ServingPool(MappingProxyType(POOL), MappingProxyType({"n000": None}))


def test_lend_rigid_lends_any_lent_node_to_rigid_batch() -> None:
    snap = training_full(cluster(4).at(NOW)).pending(job("b").gpus(8).cls(3)).build()
    pool = ServingPool(MappingProxyType(POOL), MappingProxyType({"n003": NOW + H}), lend_rigid=True)
    assert starts(run(snap.replace(serving=pool))) == {"b": ("n003",)}
    strict = ServingPool(MappingProxyType(POOL), MappingProxyType({"n003": NOW + H}))
    assert starts(run(snap.replace(serving=strict))) == {}
