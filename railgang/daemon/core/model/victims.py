"""One victim solver (issue 37 item 2): whom to shrink, evict or move so that a waiting gang fits.

Eviction (``phases/evict.py``), reclaim (``phases/reclaim.py``), whole-leaf eviction
(``phases/evict_domain.py``) and defragmentation (``phases/defrag.py``) all ask the same question:
given the running jobs that could make room (**candidates**, in the rules' order), what is needed
(**GPUs in a place**: anywhere, node by node; inside one leaf; in whole leaves) and the **rules**
(who may take whom, the churn room, the per-job interval, who is shrunk first because a shrink
pays, what a victim costs, how many placement searches), which victim set lets the gang be placed,
and what does it cost? :func:`solve` answers it once for all four; the phases only state their
rules (:class:`Rules`) and their need (:class:`Need`) and carry out the answer (:class:`Victims`).

The search (each rule named is a field of :class:`Rules` or :class:`Need`):

1. Candidates the rules may not take (``may_take``) are left out, and those past the first
   ``looked_at`` (the candidates put in the rules' ``order`` first, which a search that walks
   reads too, and an answer without a walk does not); those preempted within
   ``min_interval_s`` are left out too and mark the answer ``budget_hit`` (a budget, not the
   cluster, stood in the way). A gang that must wait ``patience_s`` for a place to free by itself
   gets ``why = "patient"`` and no search. Node by node, when the free GPUs plus the churn
   ``room`` are fewer than the need and nobody is shrunk, the walk below could never place the
   gang: its answer (``budget`` or ``no room``) is given without walking (``_beyond_room``).
2. **Shrinks** first: candidates ``shrink`` names (elastic work whose shrink pays) give their GPUs
   above their minimum, in candidate order; a later kill of the same job takes the rest.
3. **Kills by place**. For each place (``Need.places``: a node, a leaf), its candidates are taken
   cheapest first (``price``) until its free GPUs reach its target (the need, at most the place's
   GPUs); with ``trim``, those no longer needed are dropped again, dearest first. A place whose
   victims exceed the churn ``room`` is ruled out (``budget_hit``).
   - ``Need.one_place`` (a gang that must sit inside one leaf): places are tried alone, cheapest
     plan first (Σ ``cost``, then victims, then place order), the placement restricted to the
     place; a failed placement takes the place's next victims (``widen``). A gang larger than
     any place takes whole places instead, emptied cheapest per GPU first.
   - otherwise (node by node): places whose worst needed victim ranks best go first (then fewest
     GPUs killed, then place order), their victims add up, then the remaining candidates in
     order; victims skipped by the churn room or the interval mark ``budget_hit``.
   A placement is searched whenever the freed GPUs reach the need and the ``ledger`` (quota
   accounting: reclaim) admits the job, at most ``tries`` times.
4. With ``trim``, kills whose GPUs the placement does not use are not evicted. Each kill gets
   its ``grace`` (signal to kill); ``Victims.notice_s`` says when the last freed GPU comes (a
   shrink's ``shrink_notice_s``, the longest grace), 0 when the gang may start at once.

``Victims.cost`` is Σ ``cost`` over the kills (GPU-hours lost, a move's GPU-seconds); the answer
is the first victim set the search finds, not a proven optimum: ``tests/daemon/core/
test_victims.py`` checks on random occupancies that it costs no more than the four searches this
module replaced and holds it against brute force over all subsets. Pure and deterministic: the
placement is the caller's ``fits`` (the real placer on the free GPUs plus the freed ones).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from railgang.daemon.core.model import elastic
from railgang.daemon.core.model.job import Assignment, RunningJob

__all__ = ["Free", "Ledger", "Need", "Place", "Rules", "Shrink", "Victims", "Why", "never", "solve"]

Shrink = tuple[RunningJob, Assignment, Assignment]  # (victim, GPUs it keeps, GPUs it gives)
Free = Mapping[str, frozenset[int]]
Why = Literal["", "patient", "budget", "no room"]  # "": found


class _Uses(Protocol):
    @property
    def assignment(self) -> Assignment: ...


T = TypeVar("T", bound=_Uses)


class Ledger(Protocol):
    """Accounting a victim changes besides GPUs (reclaim: the accounts' borrowed quota)."""

    def allows(self, v: RunningJob) -> bool: ...  # may ``v`` still be taken?
    def take(self, v: RunningJob, gone: Assignment) -> None: ...  # ``v`` gives ``gone``
    def ready(self) -> bool: ...  # may the job be placed now?


class _Open:
    def allows(self, v: RunningJob) -> bool:
        return True

    def take(self, v: RunningJob, gone: Assignment) -> None:
        return None

    def ready(self) -> bool:
        return True


def never(v: RunningJob) -> bool:
    """No victim is shrunk (a whole-leaf eviction, defragmentation)."""
    return False


def _always(v: RunningJob) -> bool:
    return True


def _gpus(v: RunningJob) -> float:
    return float(v.gpus)


def _at_once(v: RunningJob) -> float:
    return 0.0


def _in_order(v: RunningJob, gpus: int, rank: int) -> tuple[Any, ...]:
    return (rank,)


@dataclass(frozen=True)
class Rules:
    """Who may be taken and what it costs: every rule the four phases apply, as data."""

    now: float
    may_take: Callable[[RunningJob], bool] = _always  # who may evict whom (class, level, borrowed)
    # puts candidates in the order victims are taken, when the search reads an order (None: the
    # order given); an answer that reads no order (``_beyond_room``) never calls it
    order: Callable[[list[RunningJob]], list[RunningJob]] | None = None
    looked_at: int | None = None  # candidates looked at per gang (the rest wait a cycle)
    min_interval_s: float = 0.0  # a job is preempted (or moved) at most once per this
    room: int | None = None  # churn GPUs the window still allows (None: exempt, serving)
    shrink: Callable[[RunningJob], bool] = never  # shrunk to its minimum before any kill
    cost: Callable[[RunningJob], float] = _gpus  # what taking one victim costs
    # the order victims are taken inside a place: (victim, its GPUs there, its candidate rank)
    price: Callable[[RunningJob, int, int], tuple[Any, ...]] = _in_order
    trim: bool = False  # drop victims a met target (or the placement) does not need
    widen: bool = True  # one_place: a failed placement takes the place's next victims
    tries: int = 4  # placement searches per waiting gang
    max_victims: int | None = None  # victims per place at most (defrag's movers)
    patience_s: float = 0.0  # a gang waits this long for a place to free by itself
    grace: Callable[[RunningJob], float] = _at_once  # a kill's signal-to-kill time (its checkpoint)
    shrink_notice_s: float = 0.0  # a shrink's notice: its GPUs come after it
    ledger: Ledger = field(default_factory=_Open)


@dataclass(frozen=True, slots=True)
class Place:
    """Where the gang's GPUs may come from: a node or a leaf."""

    name: str
    nodes: frozenset[str]  # its nodes the gang may use
    gpus: int  # GPUs of those nodes
    free: int  # of which free now


@dataclass(frozen=True)
class Need(Generic[T]):
    """What is needed: ``gpus`` GPUs, placed by ``fits`` on the free GPUs plus the freed ones."""

    gpus: int
    free: Free
    # fits(victims, free + freed GPUs, nodes it must use or None) -> where the gang goes, or None
    fits: Callable[[Sequence[RunningJob], Free, frozenset[str] | None], T | None]
    places: tuple[Place, ...] = ()  # none: candidates in order, one by one (reclaim)
    # node by node, the places, drawn when the walk first needs them (``_beyond_room`` reads
    # none); None: ``places`` as given
    draw_places: Callable[[], tuple[Place, ...]] | None = None
    one_place: bool = False  # the gang sits inside one place (a leaf), or whole places
    tried_free: bool = True  # a placement on the free GPUs alone already failed
    waited_s: float = 0.0  # how long the gang has waited (against ``Rules.patience_s``)


@dataclass(frozen=True, slots=True)
class Victims(Generic[T]):
    """The answer: where the gang goes and whom it costs, or why not."""

    placed: T | None = None
    shrinks: tuple[Shrink, ...] = ()
    kills: tuple[RunningJob, ...] = ()
    cost: float = 0.0  # Σ Rules.cost over the kills
    places: tuple[str, ...] = ()  # the places the placement uses (one_place searches)
    graces: tuple[float, ...] = ()  # each kill's signal-to-kill time (Rules.grace)
    notice_s: float = 0.0  # when the last freed GPU comes: 0 when the gang may start at once
    budget_hit: bool = False  # a budget ruled out a victim or a place that might have helped
    why: Why = ""  # when not placed: waiting out its patience, a budget in the way, or no set at all


def solve(need: Need[T], cands: Sequence[RunningJob], rules: Rules) -> Victims[T]:
    """The victim set that lets the gang be placed (module docstring), or why none."""
    if need.waited_s < rules.patience_s:
        return Victims(why="patient")
    cands = list(cands) if rules.may_take is _always else [v for v in cands if rules.may_take(v)]
    if rules.order is not None and (rules.looked_at is not None or need.one_place):
        cands = rules.order(cands)
    cands = cands[:rules.looked_at]
    if need.one_place:
        found = _one_place(need, cands, _fresh(cands, rules), rules)
    elif (bound := _beyond_room(need, cands, rules)) is not None:
        return bound  # (its answer reads no order)
    else:
        if rules.order is not None and rules.looked_at is None:
            cands = rules.order(cands)
        found = _walk(need, cands, _steps(need, cands, _fresh(cands, rules), rules), rules)
    if found.placed is None and not found.why:
        return Victims(budget_hit=found.budget_hit, why="budget" if found.budget_hit else "no room")
    return found


def _fresh(cands: list[RunningJob], rules: Rules) -> list[RunningJob]:
    """The candidates not preempted within ``min_interval_s``, in their order."""
    return [v for v in cands if v.job.last_preempted_at is None
            or rules.now - v.job.last_preempted_at >= rules.min_interval_s]


# -- node by node, or one by one: freed GPUs add up -------------------------------------------

def _beyond_room(need: Need[T], cands: list[RunningJob], rules: Rules) -> Victims[T] | None:
    """The walk's answer when its kills cannot reach the need inside the churn room, found
    without the walk; None when they might. Without shrinks and with no ledger to refuse a victim,
    the walk's freed GPUs are the free ones plus kills of at most ``room`` GPUs: below the need
    it never tries a placement, and its budget hit is a stale candidate or a fresh one the room
    skips (it kills fresh ones in some order while they fit: one is skipped exactly when together
    they exceed the room)."""
    room = rules.room
    if room is None or not isinstance(rules.ledger, _Open):
        return None
    if sum(len(g) for g in need.free.values()) + room >= need.gpus or any(map(rules.shrink, cands)):
        return None
    fresh = _fresh(cands, rules)
    hit = len(fresh) < len(cands) or sum(v.gpus for v in fresh) > room
    return Victims(budget_hit=hit, why="budget" if hit else "no room")


_Step = tuple[bool, RunningJob, bool]  # (kill, victim, complete: a placement may be tried after it)


def _steps(need: Need[T], cands: list[RunningJob], fresh: list[RunningJob], rules: Rules) -> Iterator[_Step]:
    """Shrinks first, then kills place by place, then the remaining candidates in order; drawn
    lazily: a walk that places the gang early never groups the other places' victims."""
    yield from [(False, v, True) for v in cands if rules.shrink(v)]
    rank = {v.job_id: i for i, v in enumerate(cands)}
    plans = []
    room = rules.room
    places = need.places if need.draw_places is None else need.draw_places()
    for order, (p, victims) in enumerate(_by_place(places, fresh)):
        taken = _pick(p, victims, min(need.gpus, p.gpus), rules, rank)
        if not taken:
            continue
        gpus = sum(v.gpus for v in taken)
        if room is None or gpus <= room:
            plans.append((rank[taken[-1].job_id], gpus, order, taken))
    seen: set[str] = set()
    plans.sort()  # by (rank of its last victim, GPUs, order): order is unique, the lists never compared
    for *_, taken in plans:
        group = [v for v in taken if v.job_id not in seen]
        seen.update(v.job_id for v in group)
        for i, v in enumerate(group):
            yield True, v, i == len(group) - 1
    yield from [(True, v, True) for v in cands if v.job_id not in seen]


def _walk(need: Need[T], cands: list[RunningJob], steps: Iterable[_Step], rules: Rules) -> Victims[T]:
    """Take the steps in order; search a placement once the freed GPUs reach the need."""
    ledger, now = rules.ledger, rules.now
    shrinks: list[Shrink] = []
    kills: list[RunningJob] = []
    extra: dict[str, frozenset[int]] = dict(need.free)
    got, killed, hit, tries = sum(len(g) for g in need.free.values()), 0, False, 0
    if not need.tried_free and got >= need.gpus and ledger.ready():
        tries += 1
        placed = need.fits((), extra, None)
        if placed is not None:
            return Victims(placed)
    for kill, v, complete in steps:
        if hit and tries >= rules.tries:
            break  # no placement is tried any more and the answer is fixed: none, a budget hit
        if not ledger.allows(v):
            continue
        if kill:
            if v.job.last_preempted_at is not None and now - v.job.last_preempted_at < rules.min_interval_s:
                hit = True
                continue
            if rules.room is not None and killed + v.gpus > rules.room:
                hit = True
                continue
            shrunk = next((s for s in shrinks if s[0].job_id == v.job_id), None)
            gone: Assignment = v.assignment
            if shrunk is not None:
                shrinks.remove(shrunk)
                gone = shrunk[1]  # the part the shrink would have kept goes too
            kills.append(v)
            killed += v.gpus
        else:
            kept, gone = elastic.shrink_assignment(v, v.job.min_replicas)
            shrinks.append((v, kept, gone))
        ledger.take(v, gone)
        for n, gs in gone.items():
            extra[n] = extra.get(n, frozenset()) | frozenset(gs)
            got += len(gs)
        if got >= need.gpus and complete and tries < rules.tries and ledger.ready():
            tries += 1
            placed = need.fits(kills, extra, None)
            if placed is not None:
                return _answer(placed, tuple(shrinks), kills, rules, (), hit)
    return Victims(budget_hit=hit)


# -- inside one place (a leaf), or whole places ------------------------------------------------

def _one_place(need: Need[T], cands: list[RunningJob], fresh: list[RunningJob], rules: Rules) -> Victims[T]:
    hit = len(fresh) < len(cands)
    rank = {v.job_id: i for i, v in enumerate(fresh)}
    held = _by_place(need.places, fresh)
    if need.gpus <= max((p.gpus for p in need.places), default=0):
        found, over = _inside_one(need, held, rank, rules)
    else:
        found, over = _whole(need, held, rank, rules)
    if found is None:
        return Victims(budget_hit=hit or over)
    placed, kills = found
    if rules.trim:  # victims whose GPUs the placement does not use would free nothing it takes
        used = set(placed.assignment)
        kills = [v for v in kills if not used.isdisjoint(v.assignment)]
    where = {n: p.name for p in need.places for n in p.nodes}
    leaves = tuple(sorted({where[n] for n in placed.assignment if n in where}))
    return _answer(placed, (), kills, rules, leaves, hit)


_Held = list[tuple[Place, list[tuple[RunningJob, int]]]]
_Found = tuple[tuple[T, list[RunningJob]] | None, bool]  # (placement and kills, a budget stood in the way)


def _inside_one(need: Need[T], held: _Held, rank: Mapping[str, int], rules: Rules) -> _Found[T]:
    plans = []
    hit = False
    for order, (p, victims) in enumerate(held):
        if p.gpus < need.gpus:
            continue
        kills = _pick(p, victims, need.gpus, rules, rank)
        if not kills and p.free < need.gpus:
            continue
        if rules.room is not None and sum(v.gpus for v in kills) > rules.room:
            hit = True
            continue
        plans.append((sum(rules.cost(v) for v in kills), len(kills), order, p, victims, kills))
    tries = 0
    for *_, p, victims, kills in sorted(plans, key=lambda q: q[:3]):
        spare = sorted((v for v, _ in victims if v not in kills), key=lambda v: rank[v.job_id])
        while tries < rules.tries:
            tries += 1
            placed = need.fits(kills, _freed(need.free, kills), p.nodes)
            if placed is not None:
                return (placed, kills), hit
            if not rules.widen or not spare or (
                    rules.room is not None and sum(v.gpus for v in kills) + spare[0].gpus > rules.room):
                break  # the place's GPUs never form the gang within the budget
            kills = [*kills, spare.pop(0)]
    return None, hit


def _whole(need: Need[T], held: _Held, rank: Mapping[str, int], rules: Rules) -> _Found[T]:
    """Whole places, emptied cheapest per GPU first, until they hold the gang."""
    whole = []
    for order, (p, victims) in enumerate(held):
        if p.gpus == 0 or p.free + sum(g for _, g in victims) < p.gpus:
            continue  # empty of GPUs, or a job the rules keep stays in it: not a whole place
        kills = sorted({v.job_id: v for v, _ in victims}.values(), key=lambda v: rank[v.job_id])
        whole.append((sum(rules.cost(v) for v in kills) / p.gpus, order, p, kills))
    got, nodes, chosen = 0, frozenset[str](), {}
    for *_, p, kills in sorted(whole, key=lambda w: w[:2]):
        if got >= need.gpus:
            break
        got += p.gpus
        nodes |= p.nodes
        chosen.update({v.job_id: v for v in kills})
    if got < need.gpus:
        return None, False
    kills = sorted(chosen.values(), key=lambda v: rank[v.job_id])
    if rules.room is not None and sum(v.gpus for v in kills) > rules.room:
        return None, True
    placed = need.fits(kills, _freed(need.free, kills), nodes)
    return ((placed, kills) if placed is not None else None), False


# -- shared ------------------------------------------------------------------------------------

def _by_place(places: Sequence[Place], cands: Sequence[RunningJob]) -> _Held:
    """Each place with the candidates holding GPUs there (and how many), in candidate order."""
    held: _Held = [(p, []) for p in places]
    where = {n: i for i, p in enumerate(places) for n in p.nodes}
    for v in cands:
        there: dict[int, int] = {}
        for n, gs in v.assignment.items():
            i = where.get(n)
            if gs and i is not None:
                there[i] = there.get(i, 0) + len(gs)
        for i, g in there.items():
            held[i][1].append((v, g))
    return held


def _pick(p: Place, victims: Sequence[tuple[RunningJob, int]], target: int, rules: Rules,
          rank: Mapping[str, int]) -> list[RunningJob]:
    """Victims of ``p``, in ``price`` order, until its free GPUs reach ``target``; with ``trim``
    the dearest (``cost``) of those no longer needed are dropped again. Empty if it cannot reach it."""
    in_rank = rules.price is _in_order  # victims come in candidate order (_by_place): rank order
    order = victims if in_rank else sorted(victims, key=lambda vg: rules.price(vg[0], vg[1], rank[vg[0].job_id]))
    got, taken = p.free, []
    for v, g in order:
        if got >= target:
            break
        taken.append((v, g))
        got += g
    if got < target or (rules.max_victims is not None and len(taken) > rules.max_victims):
        return []
    if rules.trim:
        for v, g in sorted(taken, key=lambda vg: (-rules.cost(vg[0]), -rank[vg[0].job_id])):
            if got - g >= target:
                taken.remove((v, g))
                got -= g
    return [v for v, _ in (taken if in_rank else sorted(taken, key=lambda vg: rank[vg[0].job_id]))]


def _freed(free: Free, kills: Sequence[RunningJob]) -> dict[str, frozenset[int]]:
    extra: dict[str, frozenset[int]] = dict(free)
    for v in kills:
        for n, gs in v.assignment.items():
            extra[n] = extra.get(n, frozenset()) | frozenset(gs)
    return extra


def _answer(placed: T, shrinks: tuple[Shrink, ...], kills: Sequence[RunningJob], rules: Rules,
            places: tuple[str, ...], hit: bool) -> Victims[T]:
    graces = tuple(rules.grace(v) for v in kills)
    notice = max((*graces, rules.shrink_notice_s if shrinks else 0.0), default=0.0)
    return Victims(placed, shrinks, tuple(kills), sum(rules.cost(v) for v in kills), places, graces, notice, hit)
