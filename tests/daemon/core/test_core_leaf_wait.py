"""Bounded waiting for a leaf (``CycleConfig.leaf_wait_s`` / ``leaf_holds``) with the real placer.

Fabric: two leaves of four 8-GPU nodes (n01-n04, n05-n08). A 3-node gang fits one leaf, but with
two whole nodes free in each leaf it can only be placed across both.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from railgang.daemon.core import CycleConfig, Node, Reason, Start, decide, topology_placer
from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.snapshot import make_snapshot
from railgang.daemon.core.phases.draft import INF
from railgang.daemon.core.policies.registry import get
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.core.core_builders import job

FAB = fabric_from_shape(8, 8, 4, prefix="n")
NODES = [Node(n, 8) for n in FAB.nodes]
ALL = frozenset(range(8))
# two whole nodes free per leaf, and one GPU on n01 (a best-fit slot for a 1-GPU job)
SPLIT = {"n01": frozenset({7}), "n02": ALL, "n03": ALL, "n04": frozenset(),
         "n05": ALL, "n06": ALL, "n07": frozenset(), "n08": frozenset()}
GANG = job("gang").gpus(24).tp(8).at(0).build()


def _decide(free: Mapping[str, frozenset[int]], *pending: Job, now: float, policy: str = "tiresias",
            wait: float = 60.0, holds: int = 2) -> tuple[dict[str, set[str]], dict[str, Reason]]:
    snap = make_snapshot(now=now, fabric=FAB, nodes=NODES, pending=pending,
                         free={n: free.get(n, frozenset()) for n in FAB.nodes})
    d = decide(snap, get(policy), now, random.Random(0), placer=topology_placer,
               config=CycleConfig(leaf_wait_s=wait, leaf_holds=holds))
    starts = {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}
    return starts, {r.job_id: r.code for r in d.reasons}


def _leaves(nodes: set[str]) -> set[str]:
    return {FAB.leaf_of(n) for n in nodes}


def test_a_gang_waits_for_a_leaf_within_the_bound_and_spreads_after_it() -> None:
    starts, reasons = _decide(SPLIT, GANG, now=10.0)
    assert starts == {} and reasons == {"gang": Reason.WAITING_FOR_LEAF}
    starts, reasons = _decide(SPLIT, GANG, now=60.0)  # the bound has passed: spread now
    assert len(_leaves(starts["gang"])) == 2 and reasons == {}
    starts, _ = _decide(SPLIT, GANG, now=10.0, wait=0.0)  # knob off: spreads at once
    assert len(_leaves(starts["gang"])) == 2


def test_a_gang_that_one_leaf_holds_starts_at_once() -> None:
    free = {**SPLIT, "n04": ALL}
    starts, reasons = _decide(free, GANG, now=10.0)
    assert _leaves(starts["gang"]) == {FAB.leaf_of("n01")} and reasons == {}


def test_gangs_that_no_leaf_can_hold_or_single_nodes_never_wait_for_a_leaf() -> None:
    free = {n: ALL for n in FAB.nodes}
    big = job("big").gpus(40).tp(8).at(0).build()  # 5 nodes: more than a leaf
    starts, reasons = _decide(free, big, now=1.0)
    assert len(_leaves(starts["big"])) == 2 and reasons == {}
    one = job("one").gpus(8).tp(8).at(0).build()
    assert _decide(SPLIT, one, now=1.0)[0]["one"] <= {"n02", "n03", "n05", "n06"}


def test_the_held_leaf_is_kept_from_later_small_jobs() -> None:
    small = job("small").gpus(1).at(5).build()  # after the gang in the order (queued later)
    starts, reasons = _decide(SPLIT, GANG, small, now=10.0)
    assert reasons == {"gang": Reason.WAITING_FOR_LEAF}
    held = FAB.leaf_of("n01")  # 17 free GPUs: the leaf with the most
    assert _leaves(starts["small"]) != {held}
    starts, _ = _decide(SPLIT, small, now=10.0)  # without the gang it best-fits n01's last GPU
    assert starts == {"small": {"n01"}}
    starts, _ = _decide(SPLIT, GANG, small, now=10.0, holds=0)  # no holds left: n01 again
    assert starts == {"small": {"n01"}}


def test_a_gang_waiting_for_gpus_holds_a_leaf_too_and_says_so() -> None:
    free = {**SPLIT, "n02": frozenset(), "n05": frozenset()}  # 17 GPUs free: too few for 24
    small = job("small").gpus(1).at(5).build()
    snap = make_snapshot(now=10.0, fabric=FAB, nodes=NODES, pending=[GANG, small],
                         free={n: free.get(n, frozenset()) for n in FAB.nodes})
    d = decide(snap, get("tiresias"), 10.0, random.Random(0), placer=topology_placer,
               config=CycleConfig(leaf_wait_s=60.0))
    r = d.reason("gang")
    assert r is not None and r.code is Reason.WAITING_FOR_GPUS
    assert f"holding leaf {FAB.leaf_of('n03')}" in r.detail  # n01 + n03: 9 free, n06: 8
    (s,) = d.of(Start)
    assert isinstance(s, Start) and _leaves(set(s.assignment)) == {FAB.leaf_of("n06")}


def test_fifo_keeps_the_waiting_gang_at_the_head() -> None:
    small = job("small").gpus(1).at(5).build()
    starts, reasons = _decide(SPLIT, GANG, small, now=10.0, policy="fifo")
    assert starts == {} and reasons["gang"] is Reason.WAITING_FOR_LEAF
    assert reasons["small"] is Reason.PRIORITY


def test_the_decision_is_deterministic() -> None:
    small = job("small").gpus(1).at(5).build()
    assert _decide(SPLIT, GANG, small, now=10.0) == _decide(SPLIT, GANG, small, now=10.0)


def _decide_running(ends: Mapping[str, float], *pending: Job, now: float, wait: float = 60.0,
                    max_s: float = 600.0) -> tuple[dict[str, set[str]], dict[str, Reason], str]:
    """SPLIT's busy GPUs held by running jobs whose time limits end at ``ends`` (node -> end)."""
    from railgang.daemon.core.model.job import RunningJob

    busy = {n: tuple(sorted(ALL - SPLIT[n])) for n in FAB.nodes if ALL - SPLIT[n]}
    running = [RunningJob(job(f"r-{n}").gpus(len(g)).limit(ends[n]).build(), {n: g}, 0.0, len(g))
               for n, g in busy.items()]
    snap = make_snapshot(now=now, fabric=FAB, nodes=NODES, pending=pending, running=running,
                         free={n: SPLIT[n] for n in FAB.nodes})
    d = decide(snap, get("tiresias"), now, random.Random(0), placer=topology_placer,
               config=CycleConfig(leaf_wait_s=wait, leaf_holds=2, leaf_wait_max_s=max_s))
    starts = {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}
    details = " ".join(r.detail for r in d.reasons)
    return starts, {r.job_id: r.code for r in d.reasons}, details


def test_past_the_first_bound_a_gang_waits_while_a_leaf_drains_within_it() -> None:
    soon = {"n01": 1000.0, "n04": 130.0, "n07": 1000.0, "n08": 1000.0}  # n04 frees at 130
    starts, reasons, detail = _decide_running(soon, GANG, now=100.0)
    assert starts == {} and reasons == {"gang": Reason.WAITING_FOR_LEAF}
    assert f"holding leaf {FAB.leaf_of('n04')}" in detail and "500s more" in detail
    late = {n: 1000.0 for n in soon}  # no leaf has room within the first bound: spread now
    starts, reasons, _ = _decide_running(late, GANG, now=100.0)
    assert len(_leaves(starts["gang"])) == 2 and reasons == {}
    starts, _, _ = _decide_running(soon, GANG, now=600.0)  # past the second bound: spread
    assert len(_leaves(starts["gang"])) == 2
    starts, _, _ = _decide_running(soon, GANG, now=100.0, max_s=0.0)  # no second bound
    assert len(_leaves(starts["gang"])) == 2


def test_the_hold_goes_to_the_leaf_expected_to_have_room_soonest() -> None:
    # leaf n01-n04 has 17 GPUs free, n05-n08 16; but n07 frees at 20 and n04 only at 500
    ends = {"n01": 900.0, "n04": 500.0, "n07": 20.0, "n08": 900.0}
    small = job("small").gpus(1).at(5).build()
    starts, reasons, detail = _decide_running(ends, GANG, small, now=10.0)
    assert reasons == {"gang": Reason.WAITING_FOR_LEAF}
    assert f"holding leaf {FAB.leaf_of('n07')}" in detail
    assert _leaves(starts["small"]) == {FAB.leaf_of("n01")}  # kept out of the held leaf


def test_a_gang_no_leaf_has_room_for_holds_its_leaf_before_the_jobs_ahead_of_it() -> None:
    ends = {"n01": 900.0, "n04": 500.0, "n07": 20.0, "n08": 900.0}  # leaf of n07 drains first
    node = job("node").gpus(8).tp(8).at(-5).build()  # ahead of the gang in the order
    starts, _, _ = _decide_running(ends, node, now=10.0)
    assert _leaves(starts["node"]) == {FAB.leaf_of("n07")}  # alone: the fuller leaf
    starts, reasons, detail = _decide_running(ends, node, GANG, now=10.0)
    assert reasons == {"gang": Reason.WAITING_FOR_LEAF}
    assert f"holding leaf {FAB.leaf_of('n07')}" in detail
    assert _leaves(starts["node"]) == {FAB.leaf_of("n01")}  # kept out of the leaf held early


def _first(whole_leaf_first: bool, *pending: Job) -> tuple[dict[str, set[str]], dict[str, Reason]]:
    # leaf of n01-n04 wholly free; the other leaf has one free node (n05)
    free = {n: (ALL if n in ("n01", "n02", "n03", "n04", "n05") else frozenset()) for n in FAB.nodes}
    snap = make_snapshot(now=10.0, fabric=FAB, nodes=NODES, pending=pending, free=free)
    d = decide(snap, get("tiresias"), 10.0, random.Random(0), placer=topology_placer,
               config=CycleConfig(leaf_wait_s=60.0, leaf_holds=2, whole_leaf_first=whole_leaf_first))
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}, {r.job_id: r.code for r in d.reasons}


def test_a_whole_leaf_gang_first_takes_the_free_leaf_the_smaller_gangs_ahead_would_break_up() -> None:
    whole = job("whole").gpus(32).tp(8).at(5).build()  # needs all of one leaf
    pair = job("pair").gpus(16).tp(8).at(0).build()  # ahead of it, fits only in the free leaf
    single = job("single").gpus(4).tp(4).at(1).build()  # ahead of it too
    starts, reasons = _first(False, pair, single, whole)
    assert _leaves(starts["pair"]) == {FAB.leaf_of("n01")} and reasons == {"whole": Reason.WAITING_FOR_GPUS}
    starts, reasons = _first(True, pair, single, whole)
    assert starts["whole"] == {"n01", "n02", "n03", "n04"}
    # the pair waits for GPUs (and holds the other leaf for them, so the single job waits too)
    assert reasons["pair"] == Reason.WAITING_FOR_GPUS and "single" not in starts


def test_whole_leaf_first_leaves_smaller_gangs_alone() -> None:
    # no gang that needs a whole leaf waits: the same decision with and without the setting
    pair = job("pair").gpus(16).tp(8).at(0).build()
    single = job("single").gpus(4).tp(4).at(1).build()
    assert _first(True, pair, single) == _first(False, pair, single)


def _decide_evicting(*pending: Job, now: float, patience: float | None,
                     max_s: float = 600.0) -> tuple[dict[str, set[str]], dict[str, Reason]]:
    """``_decide_running`` with no leaf draining before 1,000 s and whole-domain eviction after
    ``patience`` (None: whole_domain_evict off)."""
    from railgang.daemon.core.model.job import RunningJob
    from railgang.daemon.core.model.preemption import PreemptionBudget

    busy = {n: tuple(sorted(ALL - SPLIT[n])) for n in FAB.nodes if ALL - SPLIT[n]}
    running = [RunningJob(job(f"r-{n}").gpus(len(g)).limit(1000.0).build(), {n: g}, 0.0, len(g))
               for n, g in busy.items()]
    snap = make_snapshot(now=now, fabric=FAB, nodes=NODES, pending=pending, running=running,
                         free={n: SPLIT[n] for n in FAB.nodes})
    budget = PreemptionBudget(churn_cap=1.0, domain_patience_s=patience or 0.0)
    d = decide(snap, get("tiresias"), now, random.Random(0), placer=topology_placer,
               config=CycleConfig(leaf_wait_s=60.0, leaf_holds=2, leaf_wait_max_s=max_s, budget=budget,
                                  whole_domain_evict=patience is not None))
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}, {r.job_id: r.code for r in d.reasons}


def test_a_gang_that_will_evict_for_a_leaf_does_not_spread_before_its_patience_is_up() -> None:
    # past the first bound, no leaf drains before the second: it used to spread at once, before
    # its patience was up (issue 21, tree benchmark: 9 of 57 whole-leaf gangs)
    prod = job("gang").gpus(24).tp(8).cls(1).at(0).build()
    starts, reasons = _decide_evicting(prod, now=100.0, patience=300.0)
    assert starts == {} and reasons == {"gang": Reason.WAITING_FOR_LEAF}
    # it spreads as before: without whole-domain eviction, with a patience the second bound does
    # not outlast, past the second bound, or a batch gang (it evicts nobody)
    for kwargs in ({"patience": None}, {"patience": 600.0}, {"patience": 300.0, "now": 600.0}):
        starts, _ = _decide_evicting(prod, **{"now": 100.0, **kwargs})  # type: ignore[arg-type]
        assert len(_leaves(starts["gang"])) == 2, kwargs
    starts, _ = _decide_evicting(GANG, now=100.0, patience=300.0)
    assert len(_leaves(starts["gang"])) == 2


def _lending(backfill: bool, *pending: Job) -> tuple[dict[str, set[str]], dict[str, Reason]]:
    """SPLIT at t=100, the gang's leaf (n01-n04) drains at 130 (n04), the other leaf at 1,000."""
    from railgang.daemon.core.model.job import RunningJob

    ends = {"n01": 1000.0, "n04": 130.0, "n07": 1000.0, "n08": 1000.0}
    busy = {n: tuple(sorted(ALL - SPLIT[n])) for n in FAB.nodes if ALL - SPLIT[n]}
    running = [RunningJob(job(f"r-{n}").gpus(len(g)).limit(ends[n]).build(), {n: g}, 0.0, len(g))
               for n, g in busy.items()]
    snap = make_snapshot(now=100.0, fabric=FAB, nodes=NODES, pending=pending, running=running,
                         free={n: SPLIT[n] for n in FAB.nodes})
    d = decide(snap, get("tiresias"), 100.0, random.Random(0), placer=topology_placer,
               config=CycleConfig(leaf_wait_s=60.0, leaf_holds=1, leaf_wait_max_s=600.0,
                                  backfill_held_leaf=backfill))
    return {a.job_id: set(a.assignment) for a in d.actions if isinstance(a, Start)}, {r.job_id: r.code for r in d.reasons}


def test_a_job_that_ends_before_the_held_leaf_drains_backfills_into_it() -> None:
    filler = job("filler").gpus(16).tp(8).at(1).limit(5000.0).build()  # takes the other leaf
    short = job("short").gpus(8).tp(8).at(2).limit(20.0).build()  # ends at 120, before 130
    long = job("long").gpus(8).tp(8).at(3).limit(1000.0).build()  # would still run at 130
    starts, reasons = _lending(False, GANG, filler, short, long)
    assert reasons["gang"] == Reason.WAITING_FOR_LEAF and _leaves(starts["filler"]) == {FAB.leaf_of("n05")}
    assert "short" not in starts and "long" not in starts
    starts, reasons = _lending(True, GANG, filler, short, long)
    assert _leaves(starts["short"]) == {FAB.leaf_of("n01")} and "long" not in starts
    assert reasons["gang"] == Reason.WAITING_FOR_LEAF
    # the leaf still has room for the gang when n04 frees: the short job's GPUs are back by then
    assert len(starts["short"] & {"n02", "n03"}) == 1


def _room_at(running: list, free: Mapping[str, frozenset[int]], leaf: str, gpus: int) -> float:  # type: ignore[type-arg]
    """When ``leaf`` has ``gpus`` free by the running jobs' time limits (what the hold expects)."""
    avail = sum(len(g) for n, g in free.items() if FAB.leaf_of(n) == leaf)
    t = 100.0
    for r in sorted((r for r in running if FAB.leaf_of(next(iter(r.assignment))) == leaf), key=lambda r: r.job.time_limit_s):
        if avail >= gpus:
            break
        avail, t = avail + r.gpus, r.job.time_limit_s
    return t if avail >= gpus else INF


def test_backfill_into_a_held_leaf_only_adds_starts_that_end_before_the_leaf_has_room() -> None:
    # seeded random occupancies: lending never moves or drops a start made without it, never
    # changes the gang's reason, and each job it adds ends before its leaf was to have room
    from railgang.daemon.core.model.job import RunningJob

    lent = 0
    for seed in range(150):
        rng = random.Random(seed)
        free = {n: frozenset(g for g in ALL if rng.random() < 0.4) for n in FAB.nodes}
        running = [RunningJob(job(f"r-{n}").gpus(8 - len(g)).limit(rng.uniform(110, 2000)).build(),
                              {n: tuple(sorted(ALL - g))}, 0.0, 8 - len(g)) for n, g in free.items() if len(g) < 8]
        small = [job(f"s{i}").gpus(k).tp(k).at(1 + i).limit(rng.uniform(5, 1500)).build()
                 for i, k in enumerate(rng.choice((1, 2, 4, 8)) for _ in range(4))]
        snap = make_snapshot(now=100.0, fabric=FAB, nodes=NODES, pending=[GANG, *small], running=running, free=free)
        runs = [decide(snap, get("tiresias"), 100.0, random.Random(0), placer=topology_placer,
                       config=CycleConfig(leaf_wait_s=60.0, leaf_holds=1, leaf_wait_max_s=600.0, backfill_held_leaf=on))
                for on in (False, True)]
        off, on = ({a.job_id: a.assignment for a in d.actions if isinstance(a, Start)} for d in runs)
        assert {k: v for k, v in on.items() if k in off} == off, seed
        assert runs[0].reason("gang") == runs[1].reason("gang"), seed
        for jid in on.keys() - off.keys():
            lent += 1
            leaf = FAB.leaf_of(next(iter(on[jid])))
            limit = next(j for j in small if j.job_id == jid).time_limit_s
            assert limit is not None and 100.0 + limit <= _room_at(running, free, leaf, GANG.gpus), seed
    assert lent > 0  # the property was exercised


def test_a_lend_missed_is_tried_again_once_gpus_are_given_back_on_the_leaf() -> None:
    # a leaf held for a 16-GPU gang keeps 4 free GPUs on each of its two nodes; an 8-GPU TP-8
    # job cannot be lent those (no node has 8), until a shrink gives n000 its other 4 back
    from railgang.daemon.core.model.job import RunningJob
    from railgang.daemon.core.phases.draft import Draft
    from railgang.daemon.core.phases.leaf_wait import LeafWait
    from tests.daemon.core.core_builders import first_fit

    fab = fabric_from_shape(4, 8, 2, prefix="n")
    names = sorted(fab.nodes)
    running = [RunningJob(job(f"r{i}").gpus(4).limit(400.0).build(), {n: (0, 1, 2, 3)}, 0.0, 1)
               for i, n in enumerate(names[:2])]
    running.append(RunningJob(job("r9").gpus(16).tp(8).limit(5000.0).build(),
                              {n: tuple(range(8)) for n in names[2:]}, 0.0, 1))
    snap = make_snapshot(now=100.0, fabric=fab, nodes=[Node(n, 8) for n in names], running=running)
    d = Draft(snap, snap.now, first_fit, 0)
    waits = LeafWait(d, 600.0, 1, lend=True)
    assert waits.hold(job("gang").gpus(16).tp(8).at(0).build(), 16) == fab.leaf_of(names[0])
    small = job("small").gpus(8).tp(8).at(50).build()
    assert waits.lend(small, 1, 200.0) is None
    d.unhold({names[0]: (0, 1, 2, 3)})  # GPUs given back on the leaf (as a shrink gives them)
    placed = waits.lend(small, 1, 200.0)
    assert placed is not None and set(placed.assignment) == {names[0]}
