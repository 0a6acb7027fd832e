"""Scheduling signatures (``model/signature.py``): jobs that differ in any one field of the
signature each get their own turn (one test per field), jobs that share one are given the first
one's verdict without another search (counted in ``Decision.steps``), and the verdicts given so
are the ones a search would have found (the same decisions with every skip turned off)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from typing import Any

import pytest

from railgang.daemon.core import (
    Account,
    CycleConfig,
    Decision,
    Job,
    Node,
    Reason,
    decide,
    topology_placer,
)
from railgang.daemon.core.model.needs import Needs
from railgang.daemon.core.model.plan import Plan, Want
from railgang.daemon.core.model.signature import Signature, signature, time_key
from railgang.daemon.core.model.snapshot import Snapshot, make_snapshot
from railgang.daemon.core.phases.draft import Draft
from railgang.daemon.core.phases.place import PlacePhase
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.core.core_builders import cluster, first_fit, job

BUSY = job("busy").gpus(12)  # on two nodes of 8: 4 GPUs free, on n001


def _snap(*pending: Job, accounts: tuple[Account, ...] = ()) -> Snapshot:
    return cluster(2).running(BUSY).pending(*pending).accounts(*accounts).build()


def _phase(snap: Snapshot, wants: list[Want], mode: str = "greedy", **kw: Any) -> tuple[PlacePhase, Draft]:
    d = Draft(snap, snap.now, first_fit, 0)
    phase = PlacePhase(d, Plan(tuple(wants), mode), **kw)  # type: ignore[arg-type]
    phase.run(wants, {j.job_id: j for j in snap.pending})
    return phase, d


def _want(j: Job, **kw: Any) -> Want:
    return Want(j.job_id, kw.pop("replicas", j.replicas), kw.pop("min_replicas", j.replicas), **kw)


def _pair(**a: Any) -> tuple[Job, Job]:
    """Two 8-GPU jobs (neither fits the 4 free GPUs by itself) differing only in ``a``'s fields."""
    base = job("x").gpus(8).at(1)
    one = base.build()
    two = base.with_(**a).build()
    return one, dataclasses.replace(two, request=dataclasses.replace(two.request, job_id="y"))


# -- one field each: two jobs that differ only there both get a turn of their own -----------------
FIELDS: dict[str, dict[str, Any]] = {
    "priority_class": {"priority_class": 2},
    "shape": {"tp": 8},
    "sizes": {"elastic_min": 1, "elastic_max": 16},  # the request's range (the Want stays rigid)
    "needs": {"needs": Needs(nvlink=True)},
    "requeued": {"after_fault": True},
}


@pytest.mark.parametrize("field", sorted(FIELDS), ids=sorted(FIELDS))
def test_jobs_differing_in_one_request_field_are_not_skipped_for_each_other(field: str) -> None:
    one, two = _pair(**FIELDS[field])
    assert signature(one, _want(one), None, None, None) != signature(
        two, _want(two), None, None, None)
    phase, _ = _phase(_snap(one, two), [_want(one), _want(two)])
    assert (phase.searched, phase.skipped) == (2, 0)


def test_the_same_request_is_skipped_once_its_signature_missed() -> None:
    one, two = _pair()
    phase, d = _phase(_snap(one, two), [_want(one), _want(two)])
    assert (phase.searched, phase.skipped) == (1, 1)
    r1, r2 = d.reason("x"), d.reason("y")
    assert r1 is not None and r2 is not None
    assert (r2.code, r2.detail, r2.needed, r2.free) == (r1.code, r1.detail, r1.needed, r1.free)


def test_pools_differing_are_not_skipped_for_each_other() -> None:
    one, two = _pair()
    wants = [_want(one, pools=(("a100", ""),)), _want(two, pools=(("h100", ""),))]
    phase, _ = _phase(_snap(one, two), wants)
    assert (phase.searched, phase.skipped) == (2, 0)


def test_a_job_the_plan_names_to_reserve_is_not_skipped_for_its_twin() -> None:
    # backfill, three equal jobs none of which fits: y, named in reserve_for (starving), is not
    # skipped for x's miss and takes the reservation; named by nobody, the twins are skipped
    one, two = _pair()
    three = dataclasses.replace(two, request=dataclasses.replace(two.request, job_id="z"))
    assert signature(one, _want(one), None, None, None, True) != signature(one, _want(one), None, None, None, False)
    assert signature(one, _want(one), None, None, None).reserves is None
    for named, turns, reserved in ((frozenset({"y"}), (3, 0), "y"), (frozenset(), (1, 2), None)):
        snap = _snap(one, two, three)
        d = Draft(snap, snap.now, first_fit, 0)
        wants = [_want(one), _want(two), _want(three)]
        phase = PlacePhase(d, Plan(tuple(wants), "backfill", reserve_for=named))
        phase.run(wants, {j.job_id: j for j in snap.pending})
        assert (phase.searched, phase.skipped) == turns
        assert [j for j in "xyz" if (r := d.reason(j)) is not None and r.code == Reason.RESERVED] == (
            [reserved] if reserved else [])


def test_the_plans_sizes_differing_are_not_skipped_for_each_other() -> None:
    one, two = _pair()
    phase, _ = _phase(_snap(one, two), [_want(one), _want(two, replicas=16, min_replicas=16)])
    assert (phase.searched, phase.skipped) == (2, 0)


def test_slurm_rules_differing_are_not_skipped_for_each_other() -> None:
    # x may run only on n000 (its partition): 8 GPUs there, 16 asked, its needs are unmet; y
    # may run anywhere and waits for GPUs
    one = job("x").gpus(16).at(1).with_(needs=Needs(nodes=frozenset({"n000"}), where="of partition p")).build()
    two = job("y").gpus(16).at(2).build()
    phase, d = _phase(_snap(one, two), [_want(one), _want(two)])
    assert (phase.searched, phase.skipped) == (2, 0)
    rx, ry = d.reason("x"), d.reason("y")
    assert rx is not None and rx.code is Reason.NEEDS_UNMET
    assert ry is not None and ry.code is Reason.WAITING_FOR_GPUS


def test_accounts_under_different_quotas_are_not_skipped_for_each_other() -> None:
    # both 4 GPUs: a's quota of 2 holds x; b has room and y starts
    one, two = job("x").gpus(4).account("a").at(1).build(), job("y").gpus(4).account("b").at(2).build()
    snap = _snap(one, two, accounts=(Account("a", quota_gpus=2), Account("b", quota_gpus=64)))
    phase, d = _phase(snap, [_want(one), _want(two)])
    assert (phase.searched, phase.skipped) == (2, 0)
    r = d.reason("x")
    assert r is not None and r.code is Reason.QUOTA and "y" in d.started


def test_accounts_no_quota_reaches_share_a_signature() -> None:
    one, two = _pair(account="other")
    phase, _ = _phase(_snap(one, two), [_want(one), _want(two)])
    assert (phase.searched, phase.skipped) == (1, 1)


def test_run_times_either_side_of_the_reservation_are_not_skipped_for_each_other() -> None:
    # backfill: head h (16 GPUs) reserves the start when busy ends (t=1000); x (4 GPUs, 2,000 s)
    # would delay it and waits, y (4 GPUs, 500 s) ends before it and starts; z is x's equal
    head = job("h").gpus(16).at(0).build()
    x, y, z = (job(i).gpus(4).at(t).limit(s).build() for i, t, s in (("x", 1, 2000.0), ("y", 2, 500.0),
                                                                    ("z", 3, 2000.0)))
    snap = cluster(2).running(job("busy").gpus(12).limit(1000.0)).pending(head, x, y, z).build()
    phase, d = _phase(snap, [_want(j) for j in (head, x, y, z)], mode="backfill")
    assert "y" in d.started and "x" not in d.started
    r = d.reason("x")
    assert r is not None and r.code is Reason.PRIORITY
    assert time_key(x, False, False, False) != time_key(y, False, True, False)
    assert phase.skipped == 0  # (z came after y's start: another version, searched again)


def test_submit_times_differ_only_while_leaf_waits_are_on() -> None:
    one, two = _pair(submit_time=50.0)
    wants = [_want(one), _want(two)]
    phase, _ = _phase(_snap(one, two), wants)
    assert phase.skipped == 1  # leaf waits off: when it was submitted is not read
    leafy = cluster(2).running(BUSY).pending(one, two).build(fabric_from_shape(2, 8, 2, prefix="n"))
    phase, _ = _phase(leafy, wants, leaf_wait_s=600.0, leaf_holds=0)
    assert (phase.searched, phase.skipped) == (2, 0)


def test_a_job_that_may_start_small_is_its_own_signature() -> None:
    one, two = _pair(elastic_min=1, elastic_max=1)  # (rigid at 8, a range of one)
    wants = [_want(one, min_replicas=1), _want(two, min_replicas=1)]
    assert time_key(one, True, None, False) == "x"
    phase, _ = _phase(_snap(one, one), wants[:1])
    assert phase.searched == 1


# -- the skip happens, and is counted --------------------------------------------------------------
def _run(snap: Snapshot, policy: str) -> Decision:
    return decide(snap, get(policy), snap.now, random.Random(0), placer=first_fit)


@pytest.mark.parametrize(("policy", "searched"), [("fifo-greedy", 1), ("fifo", 2), ("slurm", 2)])
def test_a_long_queue_of_one_signature_is_searched_once_per_head(policy: str, searched: int) -> None:
    # none of 100 equal jobs fits: greedy searches the first; strict FIFO and backfill search
    # the head, then the first job behind it (the head changed), and skip the other 98
    queue = [job(f"j{i:03d}").gpus(8).at(i) for i in range(100)]
    d = _run(cluster(2).running(BUSY).pending(*queue).build(), policy)
    assert dict(d.steps) == {"searched": searched, "skipped": 100 - searched}
    assert len(d.reasons) == 100 and len({(r.code, r.detail) for r in d.reasons[2:]}) == 1


# -- the verdicts given without a search are the ones a search finds -------------------------------
class _Unique:
    """A signature no other job shares (every turn searches)."""

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


def _queues(seed: int) -> Iterator[Snapshot]:
    rng = random.Random(seed)
    for _ in range(12):
        c = cluster(4).at(100.0)
        for i in range(rng.randrange(0, 4)):
            c = c.running(job(f"r{i}").gpus(rng.choice([2, 4, 8])).limit(rng.choice([200.0, 900.0])))
        c = c.accounts(Account("a", quota_gpus=rng.choice([8, 16, 64])), Account("b"))
        c = c.pending(*(job(f"p{i:02d}").gpus(rng.choice([1, 2, 4, 8, 16, 64])).at(float(i))
                        .cls(rng.choice([2, 3, 3])).account(rng.choice("ab"))
                        .limit(rng.choice([100.0, 300.0, 5000.0])).tp(1) for i in range(30)))
        yield c.build()


@pytest.mark.parametrize("policy", ["fifo", "fifo-greedy", "slurm", "default", "themis"])
def test_skipping_changes_no_decision(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with_skips = [_run(s, policy) for s in _queues(7)]
    assert sum(d.steps["skipped"] for d in with_skips) > 0
    monkeypatch.setattr(PlacePhase, "_signer", lambda self, *a: lambda job, x: _Unique())
    without = [_run(s, policy) for s in _queues(7)]
    assert sum(d.steps["skipped"] for d in without) == 0
    for a, b in zip(with_skips, without, strict=True):
        assert a.actions == b.actions
        assert tuple(a.reasons) == tuple(b.reasons)


def _strict_queues(seed: int) -> Iterator[Snapshot]:
    """No quota, no leaf wait, no serving pool: what lets strict FIFO take the rest of the queue
    behind its head in bulk; among the waiting, jobs larger than the cluster and jobs whose needs
    no node meets, anywhere in the queue (the admission checks that come before the head's)."""
    rng = random.Random(seed)
    for _ in range(20):
        c = cluster(4).at(100.0)
        for i in range(rng.randrange(0, 4)):
            c = c.running(job(f"r{i}").gpus(rng.choice([2, 4, 8])).limit(rng.choice([200.0, 900.0])))
        pending = []
        for i in range(30):
            b = job(f"p{i:02d}").gpus(rng.choice([1, 2, 4, 8, 16, 64])).at(float(i)).cls(rng.choice([2, 3, 3]))
            if rng.random() < 0.1:
                b = b.with_(needs=Needs(nodes=frozenset({"nowhere"}), where="of partition p"))
            pending.append(b.limit(rng.choice([100.0, 300.0, 5000.0])).tp(1))
        yield c.pending(*pending).build()


def test_the_rest_behind_a_strict_head_taken_in_bulk_changes_no_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    # PlacePhase._admitted_from: from where on no admission check before the head's can hold a
    # job, the queue is one signature; every turn searched instead gives the same decisions
    bulk = [_run(s, "fifo") for s in _strict_queues(11)]
    assert sum(d.steps["skipped"] for d in bulk) > 0
    monkeypatch.setattr(PlacePhase, "_admitted_from", lambda self, order, jobs: len(order) + 1)
    monkeypatch.setattr(PlacePhase, "_signer", lambda self, *a: lambda job, x: _Unique())
    for a, s in zip(bulk, _strict_queues(11), strict=True):
        b = _run(s, "fifo")
        assert b.steps["skipped"] == 0
        assert a.actions == b.actions and tuple(a.reasons) == tuple(b.reasons)


def test_a_signature_is_a_named_tuple_of_its_fields() -> None:
    one = job("x").gpus(8).build()
    sig = signature(one, _want(one), "a", (None, None), None)
    assert isinstance(sig, Signature) and sig.quota == "a" and sig.shape == (1, 1, 1, 8)
    assert set(Signature._fields) >= {"priority_class", "shape", "sizes", "pools", "needs", "quota",
                                      "time", "requeued", "submitted", "reserves"}


def _leafy_queues(seed: int) -> Iterator[Snapshot]:
    """A fabric of two leaves (8 nodes of 8 GPUs), part of it free, gangs and small jobs waiting
    with submit times inside and past the leaf wait."""
    fab = fabric_from_shape(8, 8, 4, prefix="n")
    rng = random.Random(seed)
    for _ in range(8):
        free = {n: frozenset(range(rng.choice([0, 0, 4, 8]))) for n in fab.nodes}
        sizes = [rng.choice([1, 4, 8, 16, 24]) for _ in range(24)]
        pending = [job(f"p{i:02d}").gpus(g).tp(8 if g % 8 == 0 and rng.random() < 0.5 else 1)
                   .at(rng.choice([0.0, 500.0, 900.0])).limit(rng.choice([100.0, 5000.0])).build()
                   for i, g in enumerate(sizes)]
        yield make_snapshot(now=1000.0, fabric=fab, nodes=[Node(n, 8) for n in fab.nodes],
                            pending=pending, free=free)


@pytest.mark.parametrize("policy", ["fifo", "fifo-greedy", "slurm", "tiresias"])
def test_skipping_changes_no_decision_with_leaf_waits(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = CycleConfig(leaf_wait_s=600.0, leaf_holds=2, leaf_wait_max_s=1200.0, backfill_held_leaf=True)

    def run(s: Snapshot) -> Decision:
        return decide(s, get(policy), s.now, random.Random(0), placer=topology_placer, config=config)

    with_skips = [run(s) for s in _leafy_queues(3)]
    assert sum(d.steps["skipped"] for d in with_skips) > 0
    monkeypatch.setattr(PlacePhase, "_signer", lambda self, *a: lambda job, x: _Unique())
    for a, s in zip(with_skips, _leafy_queues(3), strict=True):
        b = run(s)
        assert a.actions == b.actions and tuple(a.reasons) == tuple(b.reasons)
