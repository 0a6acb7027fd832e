"""Whole-domain eviction (``CycleConfig.whole_domain_evict``, core/phases/evict_domain.py).

Fabric: four NVL-style blocks of four 4-GPU nodes (``blocks_are_nvlink``), 64 GPUs. A production
gang (class 1) of TP 8 must sit inside one block; batch jobs (class 3) fill the cluster.
"""

from __future__ import annotations

import random

from hypothesis import event, given, note, settings
from hypothesis import strategies as st

from railgang.daemon.core import CycleConfig, Preempt, Reason, Start, decide, topology_placer
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.preemption import PreemptionBudget
from railgang.daemon.core.model.snapshot import Snapshot, make_snapshot
from railgang.daemon.core.phases.evict_domain import domain_gang, lost_gpu_h
from railgang.daemon.core.policies.registry import get
from tests.daemon.core.core_blocks import FAB, GPN, NAMES, NODES, PER
from tests.daemon.core.core_builders import job

OPEN = PreemptionBudget(churn_cap=1.0)  # the cluster churn cap out of the way unless a test sets it


def _run(jid: str, gpus: int, nodes: dict[str, tuple[int, ...]], *, since_ckpt: float = 600.0,
         cls: int = 3, evicted: float | None = None) -> RunningJob:
    j = job(jid).gpus(gpus).tp(1).cls(cls).at(0).with_(checkpoint_cost_s=60.0)
    if evicted is not None:
        j = j.evicted(evicted)
    return RunningJob(j.build(), nodes, 0.0, gpus, last_checkpoint_time=10_000.0 - since_ckpt)


def _full(costs: dict[int, float]) -> list[RunningJob]:
    """One 4-GPU batch job per node; the jobs of block b lost ``costs[b]`` s since a checkpoint."""
    return [_run(f"r{n}", GPN, {n: tuple(range(GPN))}, since_ckpt=costs.get(i // PER, 600.0))
            for i, n in enumerate(NAMES)]


def _decide(running: list[RunningJob], *pending: Job, whole: bool = True,
            budget: PreemptionBudget = OPEN) -> tuple[Snapshot, list[Preempt], dict[str, Reason], list[Start]]:
    snap = make_snapshot(now=10_000.0, fabric=FAB, nodes=NODES, running=running, pending=pending)
    d = decide(snap, get("fifo"), 10_000.0, random.Random(0), placer=topology_placer,
               config=CycleConfig(budget=budget, whole_domain_evict=whole))
    return (snap, [a for a in d.actions if isinstance(a, Preempt)], {r.job_id: r.code for r in d.reasons},
            [a for a in d.actions if isinstance(a, Start)])


def _blocks(snap: Snapshot, victims: list[Preempt]) -> set[str]:
    return {FAB.leaf_of(n) for p in victims for n in snap.running[p.job_id].assignment}


def test_a_block_gang_empties_the_cheapest_block_only() -> None:
    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()
    snap, victims, reasons, _ = _decide(_full({2: 60.0}), gang)  # block b3 lost least since a checkpoint
    assert _blocks(snap, victims) == {"b3"} and len(victims) == 4
    assert reasons["gang"] == Reason.PREEMPTING


def test_a_half_block_gang_evicts_only_what_it_needs_inside_one_block() -> None:
    gang = job("gang").gpus(8).tp(8).cls(1).at(0).build()
    running = _full({1: 60.0})
    snap, victims, _, _ = _decide(running, gang)
    assert _blocks(snap, victims) == {"b2"} and len(victims) == 2


def test_a_gang_of_two_blocks_empties_two_whole_blocks() -> None:
    gang = job("gang").gpus(32).tp(8).cls(1).at(0).build()
    snap, victims, _, _ = _decide(_full({0: 60.0, 3: 120.0}), gang)
    assert _blocks(snap, victims) == {"b1", "b4"} and len(victims) == 8


def test_a_job_spanning_blocks_is_evicted_whole_and_priced_whole() -> None:
    # b1: one 8-GPU job over gb03-gb04 and gb05-gb06 (half in b2), cheap; the rest 4-GPU jobs
    wide = _run("wide", 16, {"gb03": (0, 1, 2, 3), "gb04": (0, 1, 2, 3), "gb05": (0, 1, 2, 3),
                             "gb06": (0, 1, 2, 3)}, since_ckpt=0.0)
    rest = [r for r in _full({0: 900.0, 1: 900.0, 2: 300.0}) if r.job_id not in
            {"rgb03", "rgb04", "rgb05", "rgb06"}]
    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()
    snap, victims, _, _ = _decide([wide, *rest], gang)
    # a victim costs GPUs x (work since its checkpoint + save 60 s + restore, 120 s by default):
    # emptying b1 costs the wide job whole (16 x 180 s) + two 900 s jobs; b3 (four 300 s jobs)
    # is cheaper, and b2 and b4 dearer
    assert lost_gpu_h(wide, 10_000.0) == 16 * (60 + wide.job.restore_cost_s) / 3600
    assert _blocks(snap, victims) == {"b3"}


def test_off_the_node_by_node_search_scatters_victims_over_blocks() -> None:
    # the failure the knob removes: each node-sized victim ranks by its own lost work, so the
    # four cheapest nodes sit in four blocks and emptying them frees nothing a TP-8 gang can use
    costs = [60.0 if i % PER == 0 else 600.0 for i in range(len(NAMES))]
    running = [_run(f"r{n}", GPN, {n: tuple(range(GPN))}, since_ckpt=c) for n, c in zip(NAMES, costs, strict=True)]
    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()
    snap, victims, _, _ = _decide(running, gang, whole=False)
    assert len(_blocks(snap, victims)) > 1
    snap, victims, _, _ = _decide(running, gang, whole=True)
    assert len(_blocks(snap, victims)) == 1 and len(victims) == 4


def test_the_churn_budget_stops_a_block_eviction_whole() -> None:
    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()
    tight = PreemptionBudget(churn_cap=12 / 64)  # 12 GPUs a window: a block needs 16
    _, victims, reasons, _ = _decide(_full({}), gang, budget=tight)
    assert victims == [] and reasons["gang"] == Reason.PREEMPTION_BUDGET


def test_recently_preempted_jobs_are_not_victims_and_their_block_is_skipped() -> None:
    running = [_run(r.job_id, GPN, dict(r.assignment), since_ckpt=60.0 if FAB.leaf_of(n) == "b1" else 600.0,
                    evicted=9_000.0 if FAB.leaf_of(n) == "b1" else None)
               for r, n in ((r, next(iter(r.assignment))) for r in _full({}))]
    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()
    snap, victims, _, _ = _decide(running, gang)
    assert "b1" not in _blocks(snap, victims) and len(_blocks(snap, victims)) == 1


def test_single_node_gangs_keep_the_node_by_node_search() -> None:
    assert not domain_gang(FAB, GPN) and domain_gang(FAB, GPN + 1) and not domain_gang(None, 64)


# per node: how it is filled (0 free, 1 one job, 2 two jobs, 4 four jobs, 8 one job with the next
# node, maybe in the next block), the class, seconds since a checkpoint, recently evicted
_fill = st.tuples(st.sampled_from([0, 1, 1, 2, 4, 8]), st.sampled_from([1, 2, 3, 3]),
                  st.integers(0, 1200), st.integers(0, 9))


@settings(max_examples=80, deadline=None)
@given(fills=st.lists(_fill, min_size=len(NAMES), max_size=len(NAMES)), gang_nodes=st.integers(2, 12),
       tp=st.sampled_from([4, 8]), churn=st.sampled_from([0.05, 0.3, 1.0]))
def test_every_eviction_set_frees_a_usable_domain_or_is_empty(
        fills: list[tuple[int, int, int, int]], gang_nodes: int, tp: int, churn: float) -> None:
    """Random occupancy (whole-node, half-node, 1-GPU and two-node jobs, classes 1-3, some
    recently evicted): a production (or serving) gang's victims are whole jobs whose GPUs its
    placement on the freed domain(s) uses, inside one block whenever a block holds the gang, or
    there are none."""
    running: list[RunningJob] = []
    taken: set[str] = set()
    for i, (kind, cls, ck, ev) in enumerate(fills):
        node = NAMES[i]
        if kind == 0 or node in taken:
            continue
        if kind == 8 and i + 1 < len(NAMES) and NAMES[i + 1] not in taken:
            taken.add(NAMES[i + 1])
            places = [{node: tuple(range(GPN)), NAMES[i + 1]: tuple(range(GPN))}]
        else:
            per = GPN // min(kind, GPN)
            places = [{node: tuple(range(k * per, (k + 1) * per))} for k in range(GPN // per)]
        taken.add(node)
        for k, on in enumerate(places):
            g = sum(len(x) for x in on.values())
            running.append(_run(f"j{i}_{k}", g, on, since_ckpt=ck + 50 * k, cls=cls,
                                evicted=9_500.0 if ev == 0 else None))
    need = gang_nodes * GPN // tp * tp  # whole TP groups, always more than a node
    gang = job("gang").gpus(need).tp(tp).cls(1 if churn < 1.0 else 0).at(0).build()
    snap, victims, _, starts = _decide(running, gang, budget=PreemptionBudget(churn_cap=churn))
    event("evicted" if victims else "evicted nobody")
    if not victims:
        return
    by_id = {p.job_id: snap.running[p.job_id] for p in victims}
    assert all(v.priority_class > gang.priority_class for v in by_id.values())
    assert all(v.job.last_preempted_at is None for v in by_id.values())
    # the block(s) every victim frees GPUs in: one block when a block holds the gang (a victim
    # that spans blocks frees GPUs in others too, evicted whole), else the freed whole blocks
    shared = set.intersection(*({FAB.leaf_of(n) for n in v.assignment} for v in by_id.values()))
    # a gang larger than a block also takes free GPUs of blocks nobody was evicted from (the
    # placement drops the victims it does not use): those blocks count as usable too
    free_in = {b for b in FAB.leaves if any(snap.free.get(n) for n in FAB.direct_nodes(b))}
    blocks = shared if need <= PER * GPN else _blocks(snap, victims) | free_in
    assert blocks
    freed = {n: set(snap.free.get(n, ())) for n in NAMES}
    for v in by_id.values():
        for n, gs in v.assignment.items():
            freed[n] |= set(gs)
    inside = {n: frozenset(g) for n, g in freed.items() if g}
    where = [{b} for b in sorted(blocks)] if need <= PER * GPN else [blocks]
    fits = [b for b in where if not hasattr(topology_placer(FAB, inside, _gang_request(gang, b)), "code")]
    note(f"fills={fills} need={need} tp={tp} churn={churn} victims={sorted(by_id)} blocks={blocks}")
    assert fits, "the freed GPUs of the domain(s) must hold the gang"
    assert starts == []


def _gang_request(gang: Job, blocks: set[str]):  # type: ignore[no-untyped-def]
    from railgang.daemon.core.model.gang import gang_for

    return gang_for(gang, gang.replicas, frozenset(n for n in NAMES if FAB.leaf_of(n) in blocks))


def test_a_patient_gang_waits_for_a_block_before_it_evicts() -> None:
    # domain_patience_s: submitted at 0, now 10,000 s; patience 20,000 s: it waits and says until when
    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()
    patient = PreemptionBudget(churn_cap=1.0, domain_patience_s=20_000.0)
    snap = make_snapshot(now=10_000.0, fabric=FAB, nodes=NODES, running=_full({2: 60.0}), pending=[gang])
    d = decide(snap, get("fifo"), 10_000.0, random.Random(0), placer=topology_placer,
               config=CycleConfig(budget=patient, whole_domain_evict=True))
    assert not [a for a in d.actions if isinstance(a, Preempt)]
    reason = next(r for r in d.reasons if r.job_id == "gang")
    assert reason.code != Reason.PREEMPTING and "after 333 min of waiting (167 so far)" in reason.detail


def test_a_gang_that_waited_its_patience_evicts_as_before() -> None:
    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()
    _, eager, _, _ = _decide(_full({2: 60.0}), gang)
    snap, victims, reasons, _ = _decide(_full({2: 60.0}), gang,
                                        budget=PreemptionBudget(churn_cap=1.0, domain_patience_s=10_000.0))
    assert [p.job_id for p in victims] == [p.job_id for p in eager] and _blocks(snap, victims) == {"b3"}
    assert reasons["gang"] == Reason.PREEMPTING


def test_a_patient_gang_is_not_answered_by_an_identical_older_one_that_failed() -> None:
    # the older gang waited past its patience and found no eviction inside the churn budget; the
    # younger one, identical but for its age, still waits for a block to free by itself
    old = job("old").gpus(16).tp(8).cls(1).at(0).build()
    young = job("young").gpus(16).tp(8).cls(1).at(9_000.0).build()
    budget = PreemptionBudget(churn_cap=0.125, domain_patience_s=5_000.0)
    snap = make_snapshot(now=10_000.0, fabric=FAB, nodes=NODES, running=_full({2: 60.0}), pending=[old, young])
    d = decide(snap, get("fifo-greedy"), 10_000.0, random.Random(0), placer=topology_placer,
               config=CycleConfig(budget=budget, whole_domain_evict=True))
    reasons = {r.job_id: r for r in d.reasons}
    assert reasons["old"].code == Reason.PREEMPTION_BUDGET
    assert reasons["young"].code != Reason.PREEMPTION_BUDGET
    assert "after 83 min of waiting (17 so far)" in reasons["young"].detail


def test_patience_leaves_node_by_node_eviction_alone() -> None:
    # without whole_domain_evict the patience is not read: the same victims as with none
    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()
    _, plain, _, _ = _decide(_full({2: 60.0}), gang, whole=False)
    _, patient, _, _ = _decide(_full({2: 60.0}), gang, whole=False,
                               budget=PreemptionBudget(churn_cap=1.0, domain_patience_s=1e9))
    assert plain and [p.job_id for p in patient] == [p.job_id for p in plain]


def test_churn_allowance_stretches_the_window_for_a_burst_and_keeps_the_rate() -> None:
    from railgang.daemon.core.model.preemption import churn_allowance
    from railgang.daemon.core.model.snapshot import PreemptEvent

    events = [PreemptEvent(9_000.0, "a", 4), PreemptEvent(9_600.0, "b", 2)]  # 1,000 and 400 s ago
    snap = make_snapshot(now=10_000.0, fabric=FAB, nodes=NODES, preemptions=events)
    cap8 = PreemptionBudget(churn_cap=0.125)  # 8 of 64 GPUs per 600 s
    assert churn_allowance(snap, cap8, 10_000.0) == (2, 8)
    # a burst of 16 (a block): 16 GPUs per 1,200 s, the same long-run rate
    assert churn_allowance(snap, PreemptionBudget(churn_cap=0.125, churn_burst_gpus=16), 10_000.0) == (6, 16)
    # a burst at or below the cap, or a cap of 0, changes nothing
    assert churn_allowance(snap, PreemptionBudget(churn_cap=0.125, churn_burst_gpus=8), 10_000.0) == (2, 8)
    assert churn_allowance(snap, PreemptionBudget(churn_cap=0.0, churn_burst_gpus=16), 10_000.0) == (2, 0)


def test_a_burst_lets_a_gang_clear_a_block_larger_than_the_churn_cap_then_pays_it_back() -> None:
    from railgang.daemon.core.model.snapshot import PreemptEvent

    gang = job("gang").gpus(16).tp(8).cls(1).at(0).build()  # a whole block: 16 GPUs
    capped = PreemptionBudget(churn_cap=0.125)  # 8 GPUs per 600 s: never a whole block
    _, victims, reasons, _ = _decide(_full({2: 60.0}), gang, budget=capped)
    assert not victims and reasons["gang"] == Reason.PREEMPTION_BUDGET
    burst = PreemptionBudget(churn_cap=0.125, churn_burst_gpus=16)
    snap, victims, reasons, _ = _decide(_full({2: 60.0}), gang, budget=burst)
    assert _blocks(snap, victims) == {"b3"} and len(victims) == 4 and reasons["gang"] == Reason.PREEMPTING

    def after(ago: float) -> list[Preempt]:  # a block cleared ``ago`` seconds before now
        snap = make_snapshot(now=10_000.0, fabric=FAB, nodes=NODES, running=_full({2: 60.0}), pending=[gang],
                             preemptions=[PreemptEvent(10_000.0 - ago, "old", 16)])
        d = decide(snap, get("fifo"), 10_000.0, random.Random(0), placer=topology_placer,
                   config=CycleConfig(budget=burst, whole_domain_evict=True))
        return [a for a in d.actions if isinstance(a, Preempt)]

    assert not after(900.0)  # past the 600-s window, inside the stretched 1,200 s: paid back yet? no
    assert len(after(1_300.0)) == 4
