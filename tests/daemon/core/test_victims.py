"""The victim solver (``core/model/victims.py``) against the four searches it replaced and against
brute force.

1. **The old searches** (``victims_reference.py``, kept verbatim): on random occupancies of the
   NVL-style block fabric (four blocks of four 4-GPU nodes, the real placer), each phase's call of
   the solver finds victims wherever the search it replaced did, at no higher cost (GPU-hours its
   kills lose, + its shrinks' transition cost; for defragmentation the moves' GPU-seconds).
2. **Brute force** over every subset of candidates on small random cases (the solver alone, a
   count-only placement): every answer obeys the rules (who may be taken, the interval, the churn
   room) and makes room; without a churn cap it finds a victim set whenever one exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from railgang.daemon.core import topology_placer
from railgang.daemon.core.model import victims
from railgang.daemon.core.model.actions import Migrate, Preempt, Resize
from railgang.daemon.core.model.elastic import ElasticRules
from railgang.daemon.core.model.gang import Placed
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.plan import Plan, want
from railgang.daemon.core.model.preemption import PreemptionBudget, victim_key
from railgang.daemon.core.model.quota import QuotaNode, QuotaTree, borrowed_gpus
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.model.snapshot import make_snapshot
from railgang.daemon.core.phases import defrag
from railgang.daemon.core.phases.draft import Draft
from railgang.daemon.core.phases.evict import EvictPhase
from railgang.daemon.core.phases.evict_domain import lost_gpu_h
from railgang.daemon.core.phases.migrate import MigrationRules, move_cost_s
from railgang.daemon.core.phases.reclaim import ReclaimPhase
from tests.daemon.core import victims_reference as ref
from tests.daemon.core.core_blocks import FAB, GPN, NAMES, NODES
from tests.daemon.core.core_builders import job

NOW = 10_000.0
ACCOUNTS = ("nlp", "vision", "ops")
TREE = QuotaTree({"org": QuotaNode("org", "org", None, 64, None),
                  "nlp": QuotaNode("nlp", "team", "org", 24, None),
                  "vision": QuotaNode("vision", "team", "org", 24, None),
                  "ops": QuotaNode("ops", "team", "org", 16, None)})
RUNS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def occupancy(draw: st.DrawFn) -> list[RunningJob]:
    """Jobs of 1, 2 and 4 GPUs on single nodes and 8-GPU jobs over two (sometimes two blocks),
    some nodes partly free; random classes, accounts, checkpoint ages, elasticity, recent evictions."""
    out: list[RunningJob] = []
    left = {n: list(range(GPN)) for n in NAMES}
    for i, n in enumerate(NAMES):
        while left[n]:
            size = draw(st.sampled_from((0, 1, 2, 4, 8)))
            if size == 0:
                break
            if size == 8:  # over this node and the next, when both are whole
                if i + 1 == len(NAMES) or len(left[n]) < GPN or len(left[NAMES[i + 1]]) < GPN:
                    continue
                on = {n: tuple(left[n]), NAMES[i + 1]: tuple(left[NAMES[i + 1]])}
                left[n], left[NAMES[i + 1]] = [], []
            elif size > len(left[n]):
                continue
            else:
                on, left[n] = {n: tuple(left[n][:size])}, left[n][size:]
            b = job(f"r{len(out):02d}").gpus(size).tp(1).cls(draw(st.sampled_from((1, 2, 3, 3))))
            b = b.account(draw(st.sampled_from(ACCOUNTS))).at(0).with_(
                checkpoint_cost_s=draw(st.sampled_from((30.0, 60.0, 300.0))))
            if size > 1 and draw(st.booleans()):
                b = b.elastic(1, size)
            evicted = draw(st.sampled_from((None, None, NOW - 600.0, NOW - 7200.0)))
            if evicted is not None:
                b = b.evicted(evicted)
            ckpt = NOW - draw(st.floats(0.0, 3600.0, allow_nan=False))
            out.append(RunningJob(b.build(), on, float(len(out)), size, last_checkpoint_time=ckpt))
    return out


def _draft(running: Sequence[RunningJob], gang: Job) -> Draft:
    snap = make_snapshot(now=NOW, fabric=FAB, nodes=NODES, running=running, pending=[gang],
                         quotas=TREE)
    return Draft(snap, NOW, topology_placer, 0)


def _cost(kills: Sequence[RunningJob], shrinks: Sequence[victims.Shrink | RunningJob] = ()) -> float:
    """GPU-hours the kills lose, + one transition of each shrunk job's GPUs."""
    shrunk = [s if isinstance(s, RunningJob) else s[0] for s in shrinks]
    return (sum(lost_gpu_h(v, NOW) for v in kills)
            + sum(v.gpus * v.job.transition_cost_s for v in shrunk) / 3600.0)


def _compare(phase: str, new: float | None, old: float | None) -> None:
    """``None``: no victim set. The solver must find one wherever the old search did, no dearer."""
    event(f"{phase}: {'both none' if old is None and new is None else 'found'}")
    if old is not None:
        assert new is not None, f"{phase}: the old search found victims, the solver none"
        assert new <= old + 1e-9, f"{phase}: solver {new:.4f} > old search {old:.4f}"
        event(f"{phase}: {'same cost' if abs(new - old) < 1e-9 else 'cheaper'}")


def _evict_phase(d: Draft, budget: PreemptionBudget, *, whole: bool) -> EvictPhase:
    ph = EvictPhase(d, Plan(()), budget, ElasticRules(), whole_domain=whole)
    ph._prepare()
    return ph


def _cands(d: Draft, gang: Job) -> list[RunningJob]:
    """Eviction's candidates as the phase ranks them (``victim_key``), before its rules."""
    return sorted((r for r in d.snap.running.values() if r.preempt_deadline is None and r.priority_class != 0),
                  key=lambda v: victim_key(v, 0.0, NOW))


budgets = st.builds(PreemptionBudget, churn_cap=st.sampled_from((0.05, 0.25, 1.0)))


@RUNS
@given(occupancy(), st.sampled_from((1, 2)), st.sampled_from((2, 4, 8)), st.sampled_from((1, 2, 4)), budgets)
def test_eviction_node_by_node_costs_no_more_than_the_old_search(
        running: list[RunningJob], cls: int, gpus: int, tp: int, budget: PreemptionBudget) -> None:
    gang = job("gang").gpus(gpus).tp(min(tp, gpus)).cls(cls).at(0).build()
    d = _draft(running, gang)
    x = want("gang", gang.replicas)
    ph = _evict_phase(d, budget, whole=False)
    takers = {v.job_id for v in ph._takers(gang, 0.0)}
    cands = [v for v in _cands(d, gang) if v.job_id in takers]
    new = ph._solve(gang, x, cands, None)
    gpus_of = {r.job_id: r.gpus for r in d.snap.running.values()}
    old = ref._evict_for(d, gang, x, cands, gpus_of, budget, ph.churn, ph.cap, ElasticRules())
    _compare("evict", None if new.placed is None else _cost(new.kills, new.shrinks),
             None if old.placed is None else _cost(old.kills, old.shrinks))
    assert (new.placed is None) == (old.placed is None) and new.kills == old.kills  # the same answer


@pytest.mark.parametrize(("victim_gpus", "code"), [(2, Reason.WAITING_FOR_GPUS), (8, Reason.PREEMPTION_BUDGET)])
def test_victims_too_few_to_matter_leave_the_reason_a_stale_one_that_would_is_a_budget(
        victim_gpus: int, code: Reason) -> None:
    """A full cluster: class-0 work everywhere but one recently evicted class-3 job. Too small to
    make room (2 of 8 GPUs), it leaves the gang waiting for GPUs; large enough (8), only the
    per-job interval keeps it, and the gang waits for the preemption budget."""
    stale = job("stale").gpus(victim_gpus).tp(1).cls(3).at(0).evicted(NOW - 600.0).build()
    running, i = [RunningJob(stale, {n: tuple(range(GPN)) for n in NAMES[:victim_gpus // GPN]}
                             if victim_gpus >= GPN else {NAMES[0]: tuple(range(victim_gpus))}, 0.0, 1)], 0
    used = {n: set(gs) for n, gs in running[0].assignment.items()}
    for n in NAMES:
        left = tuple(g for g in range(GPN) if g not in used.get(n, set()))
        if left:
            running.append(RunningJob(job(f"s{i}").gpus(len(left)).tp(1).cls(0).at(0).build(), {n: left}, 0.0, 1))
            i += 1
    gang = job("gang").gpus(8).tp(1).cls(1).at(0).build()
    d = _draft(running, gang)
    assert d.free_count == 0
    d.wait(gang, Reason.WAITING_FOR_GPUS, "", 8)  # what the place phase left it
    EvictPhase(d, Plan(()), PreemptionBudget(churn_cap=1.0)).run([want("gang", gang.replicas)], {"gang": gang})
    got = d.reason("gang")
    assert got is not None and got.code is code and not d.since(0)


@RUNS
@given(occupancy(), st.sampled_from((8, 12, 16, 32)), budgets)
def test_whole_leaf_eviction_costs_no_more_than_the_old_search(
        running: list[RunningJob], gpus: int, budget: PreemptionBudget) -> None:
    gang = job("gang").gpus(gpus).tp(4).cls(1).at(0).build()
    d = _draft(running, gang)
    x = want("gang", gang.replicas)
    ph = _evict_phase(d, budget, whole=True)
    takers = {v.job_id for v in ph._takers(gang, 0.0)}
    cands = [v for v in _cands(d, gang) if v.job_id in takers]
    new = ph._solve(gang, x, cands, None)
    old = ref.evict_domains(d, gang, x, cands, None, budget, ph.cap - ph.churn)
    _compare("domain", None if new.placed is None else _cost(new.kills),
             None if old.placed is None else _cost(old.kills))
    assert new.kills == old.kills and new.budget_hit == old.budget_hit  # the same answer
    assert new.places == old.leaves and abs(new.cost - old.lost_gpu_h) < 1e-9


@RUNS
@given(occupancy(), st.sampled_from(ACCOUNTS), st.sampled_from((2, 3)), st.sampled_from((1, 2, 4, 8)), budgets)
def test_reclaim_costs_no_more_than_the_old_search(
        running: list[RunningJob], account: str, cls: int, gpus: int, budget: PreemptionBudget) -> None:
    gang = job("gang").gpus(gpus).tp(1).cls(cls).account(account).at(0).build()
    d, d_old = _draft(running, gang), _draft(running, gang)
    need = gpus
    if d.account_gpus.get(account, 0) + need > TREE.guaranteed(account):
        return  # borrowed work does not reclaim (the phase's own check)
    x = want("gang", gang.replicas)
    phase = ReclaimPhase(d, budget)
    mark = d.mark()
    phase._serve(gang, x, need)
    acts = d.since(mark)
    byid = d.snap.running
    new_kills = [byid[a.job_id] for a in acts if isinstance(a, Preempt)]
    new_shrinks = [byid[a.job_id] for a in acts if isinstance(a, Resize)]
    borrowed = borrowed_gpus(TREE, running)
    cands = sorted((r for r in running if r.job_id in borrowed and r.job.account != account
                    and r.priority_class != 0 and r.priority_class >= cls),
                   key=lambda r: (r.start_time, r.job_id), reverse=True)
    old = ref.reclaim(d_old, TREE, budget, phase.churn, phase.cap, cands, gang, x, need)
    found_new = bool(acts)
    _compare("reclaim", _cost(new_kills, new_shrinks) if found_new else None,
             None if old is None else _cost(old[2], old[1]))


@RUNS
@given(occupancy(), st.sampled_from((8, 12, 16)), st.sampled_from((1, 2, 4)), budgets)
def test_defragmentation_costs_no_more_than_the_old_search(
        running: list[RunningJob], gpus: int, movers: int, budget: PreemptionBudget) -> None:
    gang = job("gang").gpus(gpus).tp(4).cls(3).at(0).build()
    rules, moving = defrag.DefragRules(enabled=True, max_movers=movers), MigrationRules()
    d, d_old = _draft(running, gang), _draft(running, gang)
    defrag._serve(d, gang, rules, moving, budget)
    moved = [d.snap.running[a.job_id] for a in d.actions() if isinstance(a, Migrate)]
    leaf_of = {n: FAB.leaf_of(n) for n in FAB.nodes}
    old = ref.defrag(d_old, gang, rules, moving, budget, defrag._natural_wait_s(d_old, gpus, leaf_of, rules))

    def cost(rs: Sequence[RunningJob]) -> float:
        return sum(r.gpus * move_cost_s(r, moving, NOW) for r in rs)

    _compare("defrag", cost(moved) if moved else None, None if old is None else cost([r for r, _ in old.moves]))


# -- brute force: the solver alone on small cases -------------------------------------------------

_NODES = ("a1", "a2", "b1", "b2")  # two leaves (a, b) of two 4-GPU nodes


def _fits(gpus: int) -> Callable[[object, victims.Free, frozenset[str] | None], Placed | None]:
    def fits(kills: object, free: victims.Free, nodes: frozenset[str] | None) -> Placed | None:
        taken: dict[str, tuple[int, ...]] = {}
        left = gpus
        for n in sorted(free):
            if left and (nodes is None or n in nodes) and free[n]:
                gs = tuple(sorted(free[n]))[:left]
                taken[n] = gs
                left -= len(gs)
        return None if left else Placed(taken)
    return fits


@st.composite
def small_case(draw: st.DrawFn) -> tuple[list[RunningJob], dict[str, frozenset[int]], list[float]]:
    out: list[RunningJob] = []
    free: dict[str, frozenset[int]] = {}
    for n in _NODES:
        gs = list(range(GPN))
        while gs:
            size = draw(st.sampled_from((0, 1, 2, 4)))
            if size == 0 or size > len(gs) or len(out) == 8:
                break
            b = job(f"v{len(out)}").gpus(size).tp(1).at(0)
            if draw(st.integers(0, 4)) == 0:
                b = b.evicted(NOW - 60.0)
            out.append(RunningJob(b.build(), {n: tuple(gs[:size])}, 0.0, size))
            gs = gs[size:]
        if gs:
            free[n] = frozenset(gs)
    costs = draw(st.lists(st.floats(0.1, 10.0, allow_nan=False), min_size=len(out), max_size=len(out)))
    return out, free, costs


@settings(max_examples=300, deadline=None)
@given(small_case(), st.integers(1, 8), st.sampled_from((None, 2, 4, 8)), st.booleans(), st.data())
def test_the_solver_against_brute_force_over_all_subsets(
        case: tuple[list[RunningJob], dict[str, frozenset[int]], list[float]], gpus: int,
        room: int | None, one_place: bool, data: st.DataObject) -> None:
    cands, free, costs = case
    keep = data.draw(st.sets(st.sampled_from([v.job_id for v in cands]) if cands else st.nothing()))
    price = {v.job_id: c for v, c in zip(cands, costs, strict=True)}
    rules = victims.Rules(NOW, may_take=lambda v: v.job_id not in keep, min_interval_s=3600.0, room=room,
                          cost=lambda v: price[v.job_id], trim=one_place,
                          price=(lambda v, g, rank: (price[v.job_id] / g, rank)) if one_place else victims.Rules.price)
    leaves = (victims.Place("a", frozenset(("a1", "a2")), 8, sum(len(free.get(n, ())) for n in ("a1", "a2"))),
              victims.Place("b", frozenset(("b1", "b2")), 8, sum(len(free.get(n, ())) for n in ("b1", "b2"))))
    nodes = tuple(victims.Place(n, frozenset((n,)), GPN, len(free.get(n, ()))) for n in _NODES)
    need = victims.Need(gpus, free, _fits(gpus), leaves if one_place else nodes,
                        one_place=one_place, tried_free=False)
    ranked = sorted(cands, key=lambda v: price[v.job_id])  # the rules' order: cheapest first
    got = victims.solve(need, ranked, rules)

    def ok(vs: Sequence[RunningJob]) -> bool:
        if any(v.job_id in keep or v.job.last_preempted_at is not None for v in vs):
            return False
        if room is not None and sum(v.gpus for v in vs) > room:
            return False
        places = [p.nodes for p in leaves] if one_place else [frozenset(_NODES)]
        freed = {n: len(free.get(n, ())) for n in _NODES}
        for v in vs:
            for n, gs in v.assignment.items():
                freed[n] += len(gs)
        return any(sum(freed[n] for n in ns) >= gpus for ns in places)

    best = min((sum(price[v.job_id] for v in s) for k in range(len(cands) + 1)
                for s in combinations(cands, k) if ok(s)), default=None)
    if got.placed is not None:
        assert ok(got.kills), "the solver's victims break a rule or do not make room"
        assert best is not None and got.cost >= best - 1e-9
        event("optimal" if got.cost <= best + 1e-9 else "within 2x" if got.cost <= 2 * best else "over 2x")
    elif room is None:
        assert best is None, f"a victim set costing {best} exists and the solver found none ({got.why})"
        event("none exists")
    else:
        event("none found under a churn cap" + ("; one exists" if best is not None else ""))


def test_each_rule_is_an_input() -> None:
    """One node of 4 GPUs, all held: a (2 GPUs, cheap) and b (2 GPUs, dear); 2 GPUs are needed."""
    a = RunningJob(job("a").gpus(2).tp(1).at(0).build(), {"a1": (0, 1)}, 0.0, 2)
    b = RunningJob(job("b").gpus(2).tp(1).at(0).evicted(NOW - 7200.0).build(), {"a1": (2, 3)}, 0.0, 2)
    e = RunningJob(job("e").gpus(2).tp(1).elastic(1, 2).at(0).build(), {"a2": (0, 1)}, 0.0, 2)
    need = victims.Need(2, {}, _fits(2), (victims.Place("a1", frozenset(("a1",)), GPN, 0),))

    def kills(rules: victims.Rules, *cands: RunningJob) -> tuple[str, ...] | str:
        got = victims.solve(need, cands or (a, b), rules)
        return tuple(v.job_id for v in got.kills) if got.placed is not None else got.why

    base = victims.Rules(NOW)
    assert kills(base) == ("a",)
    assert kills(victims.Rules(NOW, may_take=lambda v: v.job_id != "a")) == ("b",)  # who may take whom
    assert kills(victims.Rules(NOW, room=1)) == "budget"  # the churn room
    assert kills(victims.Rules(NOW, min_interval_s=3 * 3600.0, may_take=lambda v: v.job_id == "b")) == "budget"
    assert kills(victims.Rules(NOW, patience_s=60.0)) == "patient"  # it has waited 0 s
    got = victims.solve(need, (a,), victims.Rules(NOW, grace=lambda v: 90.0))
    assert got.graces == (90.0,) and got.notice_s == 90.0  # grace: when the GPUs come
    shrunk = victims.solve(victims.Need(1, {}, _fits(1), ()), (e,),
                           victims.Rules(NOW, shrink=lambda v: True, shrink_notice_s=20.0))
    assert shrunk.kills == () and [s[0].job_id for s in shrunk.shrinks] == ["e"] and shrunk.notice_s == 20.0
    assert kills(base, b, a) == ("b",)  # the candidates come in the rules' order


@settings(max_examples=200, deadline=None)
@given(small_case(), st.integers(1, 8), st.sampled_from((None, 2, 4, 8)))
def test_node_by_node_in_rank_order_matches_the_general_pick(
        case: tuple[list[RunningJob], dict[str, frozenset[int]], list[float]], gpus: int, room: int | None) -> None:
    """Evict's rules (victims priced in rank order, no trim) skip ``_pick``'s sorts, since
    ``_by_place`` hands them over in that order; an equal price that is sorted gives the same
    answer."""
    cands, free, _ = case
    nodes = tuple(victims.Place(n, frozenset((n,)), GPN, len(free.get(n, ()))) for n in _NODES)
    need = victims.Need(gpus, free, _fits(gpus), nodes, tried_free=False)
    fast = victims.solve(need, cands, victims.Rules(NOW, min_interval_s=3600.0, room=room))
    general = victims.solve(need, cands, victims.Rules(NOW, min_interval_s=3600.0, room=room,
                                                       price=lambda v, g, rank: (rank,)))
    assert fast == general


def test_node_by_node_on_a_large_cluster_sorts_and_groups_only_what_the_walk_takes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 full nodes, one 4-GPU job on each, a 4-GPU gang: the first node's victim places it.
    Per waiting gang the old searches grouped each node's victims in rank order once; the solver
    sorted them per node (``_pick``) and grouped every node before the walk took the first: the
    preempt phase at 10,000 waiting jobs cost 2x the old searches (BENCHMARKS.md, issue 37 item 2)."""
    names = [f"n{i:04d}" for i in range(2000)]
    cands = [RunningJob(job(f"v{i:04d}").gpus(GPN).tp(1).at(0).build(), {n: tuple(range(GPN))}, 0.0, GPN)
             for i, n in enumerate(names)]
    sorts: list[object] = []

    def counted(*a: Any, **kw: Any) -> list[Any]:
        sorts.append(a)
        return sorted(*a, **kw)

    monkeypatch.setattr(victims, "sorted", counted, raising=False)  # (shadows the builtin there)
    need = victims.Need(GPN, {}, _fits(GPN), tuple(victims.Place(n, frozenset((n,)), GPN, 0) for n in names))
    got = victims.solve(need, cands, victims.Rules(NOW))
    assert [v.job_id for v in got.kills] == ["v0000"] and sorts == []
    steps = victims._steps(need, cands, cands, victims.Rules(NOW))
    assert next(iter(steps))[1].job_id == "v0000" and not isinstance(steps, list)  # drawn lazily


def test_eviction_states_its_rules_once_per_waiting_gang(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full cluster of 1-GPU batch jobs, one class-1 gang waiting for 4 GPUs: the phase built a
    Rules (a frozen dataclass, a ledger) per running job to filter its candidates (issue 37 item 2)."""
    running = [RunningJob(job(f"r{n}{g}").gpus(1).tp(1).cls(3).at(0).build(), {n: (g,)}, 0.0, 1)
               for n in NAMES for g in range(GPN)]
    gang = job("gang").gpus(4).tp(1).cls(1).at(0).build()
    d = Draft(make_snapshot(now=NOW, fabric=FAB, nodes=NODES, running=running, pending=[gang]),
              NOW, topology_placer, 0)
    d.wait(gang, Reason.WAITING_FOR_GPUS, "full", 4)
    built = []
    rules = EvictPhase._rules

    def counted(self: EvictPhase, *a: Any) -> victims.Rules:
        built.append(a)
        return rules(self, *a)

    monkeypatch.setattr(EvictPhase, "_rules", counted)
    EvictPhase(d, Plan(()), PreemptionBudget(churn_cap=1.0)).run([want("gang", gang.replicas)], {"gang": gang})
    assert len([a for a in d.actions() if isinstance(a, Preempt)]) == 4
    assert len(built) <= 2, f"{len(built)} Rules for one waiting gang"


def test_a_walk_stops_once_its_tries_are_spent_and_a_budget_hit() -> None:
    """200 full nodes, a 4-GPU victim on each, a gang no placement fits, churn room for 4 victims:
    after 4 tries and the 5th victim over the room, the answer is fixed (none, a budget hit); the
    walk went on through every candidate (slurm's preempt phase at 10,000 waiting: +20 %, issue 37)."""
    cands = [RunningJob(job(f"v{i:03d}").gpus(GPN).tp(1).at(0).build(), {f"n{i:03d}": tuple(range(GPN))}, 0.0, GPN)
             for i in range(200)]
    asked = []

    class Counted:
        def allows(self, v: RunningJob) -> bool:
            asked.append(v.job_id)
            return True

        def take(self, v: RunningJob, gone: object) -> None:
            return None

        def ready(self) -> bool:
            return True

    nodes = tuple(victims.Place(n, frozenset((n,)), GPN, 0) for v in cands for n in v.assignment)
    need: victims.Need[Placed] = victims.Need(GPN, {}, lambda *a: None, nodes)
    got = victims.solve(need, cands, victims.Rules(NOW, room=4 * GPN, ledger=Counted()))
    assert got.placed is None and got.why == "budget"
    assert len(asked) == 5, f"{len(asked)} steps walked"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(occupancy(), st.sampled_from((2, 3, 3)), st.sampled_from((0.0, 1.0, 2.0)), st.booleans(),
       st.lists(st.sampled_from((0.0, 0.5, 1.0, 2.0)), min_size=40, max_size=40),
       st.sampled_from((0.0, 1.0, 2.0)))
def test_the_worst_level_check_says_whether_anybody_may_be_evicted(
        running: list[RunningJob], cls: int, level: float, within: bool, levels: list[float],
        top: float) -> None:
    """The preempt phase asks "may anybody be evicted?" of the per-class worst level before it
    ranks anyone (``_may_find_victims_ignoring_budget``, cheaper in a replay: BENCHMARKS); it is
    the class and level rule itself (``_takers``, ``_eligible``) asked of everybody at once."""
    gang = job("gang").gpus(4).tp(1).cls(cls).at(0).build()
    # levels capped at ``top``: the worst level often equals the gang's (the boundary)
    plan = Plan((), levels={r.job_id: min(lv, top) for r, lv in zip(running, levels, strict=False)},
                preempt_within_class=within)
    ph = EvictPhase(_draft(running, gang), plan, PreemptionBudget())
    ph._prepare()
    anybody = bool(ph._takers(gang, level))
    event(f"anybody may be evicted: {anybody}")
    assert ph._may_find_victims_ignoring_budget(gang, level) == anybody


@settings(max_examples=300, deadline=None)
@given(small_case(), st.integers(1, 16), st.sampled_from((0, 1, 2, 4, 8)), st.booleans(), st.data())
def test_a_need_beyond_the_churn_room_is_answered_as_the_walk_answers_it(
        case: tuple[list[RunningJob], dict[str, frozenset[int]], list[float]], gpus: int, room: int,
        elastic_shrinks: bool, data: st.DataObject) -> None:
    """``_beyond_room`` (no walk when the free GPUs plus the churn room are fewer than the need)
    gives the walk's own answer: the same ``why`` and ``budget_hit``, stale candidates and fresh
    ones over the room alike; with a shrink it leaves the answer to the walk."""
    cands, free, _ = case
    keep = data.draw(st.sets(st.sampled_from([v.job_id for v in cands]) if cands else st.nothing()))
    rules = victims.Rules(NOW, may_take=lambda v: v.job_id not in keep, min_interval_s=3600.0, room=room,
                          shrink=(lambda v: v.gpus > 2) if elastic_shrinks else victims.never)
    nodes = tuple(victims.Place(n, frozenset((n,)), GPN, len(free.get(n, ()))) for n in _NODES)
    need = victims.Need(gpus, free, _fits(gpus), nodes, tried_free=data.draw(st.booleans()))
    got = victims.solve(need, cands, rules)
    taken = [v for v in cands if v.job_id not in keep]
    fresh = [v for v in taken if v.job.last_preempted_at is None]
    walked = victims._walk(need, taken, victims._steps(need, taken, fresh, rules), rules)
    if walked.placed is None:
        walked = victims.Victims(budget_hit=walked.budget_hit, why="budget" if walked.budget_hit else "no room")
    bound = victims._beyond_room(need, taken, rules)
    event("bound" if bound is not None else "walked")
    assert got == walked
    if bound is not None:
        assert bound == walked and not any(map(rules.shrink, taken))
