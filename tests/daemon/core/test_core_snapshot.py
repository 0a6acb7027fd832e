"""Snapshot: immutable, what-ifs are new snapshots, derived counts."""

from __future__ import annotations

import dataclasses

import pytest

from railgang.daemon.core import Account, Node, Preempt, Reason, Resize, Start, make_snapshot
from tests.daemon.core.core_builders import cluster, job


def test_free_defaults_to_unassigned_gpus_and_skips_drained_nodes() -> None:
    snap = make_snapshot(now=0, fabric=None, nodes=[Node("a", 8), Node("b", 8, state="drain")])
    assert dict(snap.free) == {"a": frozenset(range(8))}
    assert (snap.total_gpus, snap.free_gpus) == (8, 8)


def test_snapshot_is_immutable_all_the_way_down() -> None:
    snap = cluster(2).running(job("r").gpus(4)).pending(job("p").gpus(2)).build()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.now = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        snap.free["n000"] = frozenset()  # type: ignore[index]
    with pytest.raises(TypeError):
        snap.running["x"] = snap.running["r"]  # type: ignore[index]
    assert isinstance(snap.pending, tuple)


def test_what_if_is_a_new_snapshot() -> None:
    snap = cluster(1).pending(job("p").gpus(2)).build()
    other = snap.replace(pending=())
    assert snap.pending and not other.pending and other.free == snap.free


def test_account_usage_views() -> None:
    snap = (cluster(2).accounts(Account("ml", quota_gpus=8))
            .running(job("a").gpus(4).account("ml"), job("b").gpus(2).account("ml")).build())
    assert snap.account_running_gpus() == {"ml": 6}
    assert snap.account("ml").quota_gpus == 8
    assert snap.account("unknown").quota_gpus is None


def test_actions_are_frozen_and_carry_exact_assignments() -> None:
    s = Start("j", {"n1": (2, 0), "n0": (1,)}, replicas=3)
    assert list(s.assignment) == ["n0", "n1"] and s.assignment["n1"] == (0, 2) and s.gpus == 3
    r = Resize("j", 2, {"n0": (0, 1)}, old_replicas=1)
    assert r.grow and r.gpus == 2
    p = Preempt("v", grace_s=120.0, reason=Reason.PRIORITY, for_job="j", gpus=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.grace_s = 0  # type: ignore[misc]
