"""Hot spares (model/spares.py): idle nodes kept in a large gang's leaf for its restart, lent
only to short class-3 work; off by default (issue 20; docs/failures.md)."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core import Node, RunningJob, Start, decide, topology_placer
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.snapshot import Snapshot, make_snapshot
from railgang.daemon.core.model.spares import SpareRules, lendable, spare_nodes
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.core.core_builders import job

FAB = fabric_from_shape(8, 8, 4, prefix="n")  # leaves s1 = n01-n04, s2 = n05-n08
RULES = SpareRules(per_leaf=1, min_gang_gpus=16, lend_max_s=3600.0)
ALL = tuple(range(8))


def snap(*pending: object, running: tuple[RunningJob, ...] = ()) -> Snapshot:
    held = {n for r in running for n in r.assignment}
    return make_snapshot(now=100.0, fabric=FAB, nodes=[Node(n, 8) for n in FAB.nodes],
                         running=running, pending=pending,  # type: ignore[arg-type]
                         free={n: frozenset() if n in held else frozenset(ALL) for n in FAB.nodes})


GANG = RunningJob(job("gang").gpus(16).tp(8).cls(1).build(), {"n01": ALL, "n02": ALL}, 0.0, 2)


def starts(s: Snapshot, rules: SpareRules = RULES) -> dict[str, set[str]]:
    d = decide(s, get("fifo"), s.now, random.Random(0), config=CycleConfig(spares=rules),
               placer=topology_placer)
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}


def test_one_idle_node_is_kept_in_the_large_gangs_leaf_only() -> None:
    assert spare_nodes(snap(running=(GANG,)), RULES) == {"n03"}  # by name
    assert spare_nodes(snap(running=(GANG,)), SpareRules()) == frozenset()  # off by default
    small = RunningJob(job("s").gpus(8).tp(8).build(), {"n05": ALL}, 0.0, 1)
    assert spare_nodes(snap(running=(small,)), RULES) == frozenset()  # no large gang, no spare


def test_long_work_leaves_the_spare_idle_short_preemptible_work_may_borrow_it() -> None:
    two_nodes = job("long").gpus(16).tp(8).limit(7200.0).at(1)
    assert starts(snap(two_nodes.build(), running=(GANG,))) == {"long": {"n05", "n06"}}
    # everything but the spare is taken: long work waits, short class-3 work may use it
    full = (GANG, RunningJob(job("f").gpus(40).tp(8).build(),
                             {n: ALL for n in ("n03", "n05", "n06", "n07", "n08")}, 0.0, 5))
    assert starts(snap(job("long").gpus(8).tp(8).limit(7200.0).build(), running=full)) == {}
    assert starts(snap(job("short").gpus(8).tp(8).limit(1800.0).build(), running=full)) == {
        "short": {"n04"}}
    assert starts(snap(job("prod").gpus(8).tp(8).limit(60.0).cls(1).build(), running=full)) == {}
    # without spares the long job takes the node
    assert starts(snap(job("long").gpus(8).tp(8).limit(7200.0).build(), running=full),
                  SpareRules()) == {"long": {"n04"}}


def test_a_restarting_gang_takes_the_spare_in_its_leaf() -> None:
    # n02 died under the gang: it waits (after_fault) beside an older job of the same class
    alive = [Node(n, 8) for n in FAB.nodes if n != "n02"]
    other = RunningJob(job("o").gpus(24).tp(8).build(), {n: ALL for n in ("n05", "n06", "n07")}, 0.0, 3)
    lent = RunningJob(job("l").gpus(8).tp(8).limit(600.0).build(), {"n08": ALL}, 0.0, 1)
    restart = job("gang").gpus(16).tp(8).cls(3).at(0).with_(after_fault=True).build()
    rival = job("long").gpus(16).tp(8).limit(7200.0).at(-5).build()  # older, also 2 nodes
    s = make_snapshot(now=100.0, fabric=FAB, nodes=alive, running=(other, lent),
                      pending=(rival, restart),
                      free={n: frozenset(ALL) for n in ("n01", "n03", "n04")})
    got = starts(s)
    assert set(got) == {"gang"} and len(got["gang"]) == 2  # first in its class
    assert {FAB.leaf_of(n) for n in got["gang"]} == {"s1"}, got


@pytest.mark.parametrize(("cls", "limit", "work", "ok"), [
    (3, 1800.0, None, True), (3, None, 1200.0, True), (3, None, None, False),
    (3, 7200.0, None, False), (1, 60.0, None, False)],
    ids=["short-limit", "short-work", "unknown", "long", "not-preemptible"])
def test_lendable(cls: int, limit: float | None, work: float | None, ok: bool) -> None:
    j = job("j").cls(cls).with_(time_limit_s=limit, work_remaining_s=work).build()
    assert lendable(j, RULES) is ok


def test_bad_rules_are_refused() -> None:
    with pytest.raises(ValueError, match="per_leaf"):
        SpareRules(per_leaf=-1)
    with pytest.raises(ValueError, match="lend_max_s"):
        SpareRules(per_leaf=1, lend_max_s=float("nan"))
