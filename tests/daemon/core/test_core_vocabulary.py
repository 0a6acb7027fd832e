"""One word, one type (STYLE 15): placement failures map onto reasons, node states are typed."""

from __future__ import annotations

import dataclasses
import random

import pytest

from railgang.daemon.core import (
    Node,
    NodeState,
    PlacementFailure,
    Reason,
    Start,
    decide,
    gang_for,
    make_snapshot,
    reason_for,
)
from railgang.daemon.core.model.job import JobRequest
from railgang.daemon.core.model.needs import Needs
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import fabric_from_shape
from railgang.topology.health import LinkHealth
from railgang.topology.placement import GangRequest
from tests.daemon.core.core_builders import job


def test_every_placement_failure_has_its_own_reason() -> None:
    reasons = [reason_for(code) for code in PlacementFailure]  # total: no KeyError
    assert len(set(reasons)) == len(reasons)  # one to one
    assert reason_for(PlacementFailure.QUARANTINED) is not Reason.FRAGMENTED
    assert reason_for(PlacementFailure.INSUFFICIENT_GPUS) is Reason.WAITING_FOR_GPUS


def test_only_request_failures_are_about_the_request() -> None:
    about = {c for c in PlacementFailure if c.about_the_request}
    assert about == {PlacementFailure.INVALID_REQUEST, PlacementFailure.GPU_MEMORY,
                     PlacementFailure.NO_NVLINK_DOMAIN}


def test_the_core_asks_topology_for_its_own_gang_request() -> None:
    gang = gang_for(job("a").gpus(16).tp(4).build(), 2)
    assert gang == GangRequest(gpus=8, tp=4, pp=1, dp=2)
    assert len({gang, gang_for(job("b").gpus(16).tp(4).build(), 2)}) == 1


def test_a_jobs_needs_have_one_home_and_reach_the_placer_as_the_nodes_meeting_them() -> None:
    # issue 34 item 5: JobRequest kept min_gpu_mem_gb and needs_nvlink beside needs' own, which
    # no reader filled; the needs (Needs) are the one source, the placer gets the nodes meeting them
    assert {"min_gpu_mem_gb", "needs_nvlink"}.isdisjoint(f.name for f in dataclasses.fields(JobRequest))
    need = Needs(min_gpu_mem_gb=80.0, nvlink=True)
    gang = gang_for(job("a").gpus(16).tp(4).with_(needs=need).build(), 2, frozenset({"n01"}))
    assert gang == GangRequest(gpus=8, tp=4, pp=1, dp=2, nodes=frozenset({"n01"}))


def _two_nodes(*pending: object, health: LinkHealth | None = None):  # type: ignore[no-untyped-def]
    fabric = fabric_from_shape(2, 8, 2)
    return make_snapshot(now=0.0, fabric=fabric, nodes=[Node(n, 8) for n in fabric.nodes],
                         pending=[p.build() for p in pending],  # type: ignore[attr-defined]
                         health=health)


def test_a_gang_that_fits_only_on_quarantined_nodes_says_so() -> None:
    health = LinkHealth(quarantined={"n02": "lame link mlx5_0 port 1"})
    snap = _two_nodes(job("big").gpus(16), health=health)
    d = decide(snap, get("fifo"), 0.0, random.Random(0))  # the real topology placer
    reason = d.reason("big")
    assert reason is not None and reason.code is Reason.QUARANTINED and "quarantined" in reason.detail


def test_a_request_no_node_meets_names_the_need_and_blocks_nobody() -> None:
    snap = _two_nodes(job("fat").gpus(8).with_(needs=Needs(min_gpu_mem_gb=1e6)), job("small").gpus(4).at(1))
    d = decide(snap, get("fifo"), 0.0, random.Random(0))
    reason = d.reason("fat")
    assert reason is not None and reason.code is Reason.NEEDS_UNMET and "gpumem>=1e+06G" in reason.detail
    assert [a.job_id for a in d.actions if isinstance(a, Start)] == ["small"]


@pytest.mark.parametrize(
    ("text", "state"),
    [("idle", NodeState.IDLE), ("IDLE", NodeState.IDLE), ("mix", NodeState.MIXED),
     ("MIXED", NodeState.MIXED), ("alloc", NodeState.ALLOCATED),
     ("ALLOCATED+COMPLETING", NodeState.ALLOCATED), ("idle~", NodeState.IDLE),
     ("IDLE+DRAIN", NodeState.DRAIN), ("drng", NodeState.DRAIN), ("DRAINED", NodeState.DRAIN),
     ("MIXED+DRAIN", NodeState.DRAIN), ("down*", NodeState.DOWN), ("idle*", NodeState.DOWN),
     ("DOWN+DRAIN", NodeState.DOWN), ("FAIL", NodeState.DOWN), (" drain ", NodeState.DRAIN)],
    ids=lambda v: str(v),
)
def test_slurm_node_states_parse_into_the_typed_value(text: str, state: NodeState) -> None:
    assert NodeState.parse(text) is state


@pytest.mark.parametrize("text", ["", "  ", "sleepy", "+drain"])
def test_unknown_node_states_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="node state"):
        NodeState.parse(text)


def test_nodes_hold_a_typed_state_and_drained_ones_hold_no_capacity() -> None:
    nodes = [Node("a", 8), Node("b", 8, NodeState.DRAIN), Node("c", 8, "down*")]  # type: ignore[arg-type]
    assert nodes[2].state is NodeState.DOWN  # a Slurm string is parsed once, at the boundary
    snap = make_snapshot(now=0.0, fabric=None, nodes=nodes)
    assert snap.total_gpus == 8 and set(snap.free) == {"a"}
    assert [n.state.usable for n in nodes] == [True, False, False]
