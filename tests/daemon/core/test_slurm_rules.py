"""Slurm's own rules in the core (issue 35): a job's partitions, --exclude list and --constraint
features narrow the nodes it may run on (``Needs.nodes``), like its needs; a job that fits
nowhere it may run waits with a reason that says where it may run."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core import Node, Reason, Start, decide, make_snapshot
from railgang.daemon.core.model.needs import NO_NEEDS, UNKNOWN_FACTS, Needs, eligible_nodes
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.core.core_builders import job

WHERE = "of partition gpu outside its --exclude list"


def _cluster(*pending: object, busy: int = 0):  # type: ignore[no-untyped-def]
    """4 idle nodes x 8 GPUs on 2 leaves; the first ``busy`` nodes fully used."""
    fabric = fabric_from_shape(4, 8, 2)
    names = list(fabric.nodes)
    free = {n: frozenset() if i < busy else frozenset(range(8)) for i, n in enumerate(names)}
    return names, make_snapshot(now=0.0, fabric=fabric, nodes=[Node(n, 8) for n in names], free=free,
                                pending=[p.build() for p in pending])  # type: ignore[attr-defined]


def _starts(d: object) -> dict[str, set[str]]:
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}  # type: ignore[attr-defined]


def test_allowed_nodes_are_needs_and_no_restriction_is_none() -> None:
    assert Needs(nodes=None) == NO_NEEDS and Needs(nodes=None).empty
    only = Needs(nodes=frozenset({"n4"}), where=WHERE)
    assert not only.empty and only.render() == ""  # never in the tag
    facts = dict.fromkeys(("n1", "n2", "n3", "n4"), UNKNOWN_FACTS)
    assert eligible_nodes(only, facts) == frozenset({"n4"})
    assert only.on() == f"the nodes {WHERE}"
    both = Needs(min_gpu_mem_gb=40.0, nodes=frozenset({"n4"}), where=WHERE)
    assert both.on() == f"the nodes {WHERE} that meet gpumem>=40G"
    assert Needs(nodes=frozenset()).on() == "the nodes Slurm lets it use"


@pytest.mark.parametrize("policy", ["fifo", "default"])
def test_an_excluded_job_starts_only_on_the_node_it_may_use(policy: str) -> None:
    """The headline bug: --exclude=n01,n02,n03 on an idle 4-node cluster was started on n01,
    and Slurm kept it pending forever under that ReqNodeList."""
    names, _ = _cluster()
    _, snap = _cluster(job("x").gpus(8).with_(needs=Needs(nodes=frozenset({names[3]}), where=WHERE)))
    d = decide(snap, get(policy), 0.0, random.Random(0))
    assert _starts(d) == {"x": {names[3]}}


def test_a_job_too_big_for_where_it_may_run_waits_as_needs_unmet_and_blocks_nobody() -> None:
    names, _ = _cluster()
    _, snap = _cluster(job("x").gpus(16).with_(needs=Needs(nodes=frozenset({names[3]}), where=WHERE)),
                       job("y").gpus(8).at(1))
    d = decide(snap, get("fifo"), 0.0, random.Random(0))
    r = d.reason("x")
    assert r is not None and r.code is Reason.NEEDS_UNMET
    assert r.detail.startswith(f"8 GPUs on the nodes {WHERE}; the cluster has 4 nodes x 8 GPUs"), r.detail
    assert "y" in _starts(d)


def test_a_job_whose_nodes_are_busy_waits_for_them_and_says_where() -> None:
    names, _ = _cluster()
    _, snap = _cluster(job("x").gpus(8).with_(needs=Needs(nodes=frozenset(names[:2]), where=WHERE)),
                       job("y").gpus(8).at(1), busy=2)
    d = decide(snap, get("default"), 0.0, random.Random(0))
    r = d.reason("x")
    assert "x" not in _starts(d) and r is not None
    assert r.code in (Reason.NO_ELIGIBLE_CAPACITY, Reason.RESERVED), r
    assert _starts(d)["y"] <= set(names[2:])
    d = decide(snap, get("fifo"), 0.0, random.Random(0))
    r = d.reason("x")
    assert r is not None and r.code is Reason.NO_ELIGIBLE_CAPACITY, r
    assert r.detail == f"too few free GPUs on the nodes {WHERE}"


def test_needs_and_allowed_nodes_intersect() -> None:
    names, _ = _cluster()
    # no node's memory is known: none meets gpumem>=1G
    _, snap = _cluster(job("x").gpus(8).with_(needs=Needs(min_gpu_mem_gb=1.0, nodes=frozenset(names),
                                                           where=WHERE)))
    r = decide(snap, get("fifo"), 0.0, random.Random(0)).reason("x")
    assert r is not None and r.code is Reason.NEEDS_UNMET
    assert f"0 GPUs on the nodes {WHERE} that meet gpumem>=1G" in r.detail
