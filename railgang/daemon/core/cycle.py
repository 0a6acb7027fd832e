"""One decision cycle: ``decide(snapshot, policy, now, rng) -> Decision(actions, reasons)``.

Pure and deterministic (STYLE 1): the same snapshot, policy, ``now`` and rng state give the same
decision; no I/O, no clock reads that influence a decision (``phase_ms`` is measurement only and
is excluded from equality). The recipe:

1. **observe** — a private working copy of the free GPUs, per-account usage and the churn spent.
2. **order**   — ``policy.plan``; the plan's order is kept inside each priority class, classes
   first (0 serving … 3 batch), so ordering key = (class, requeued by a node failure first,
   policy rank).
3. **size**    — shrinks the plan asks for (Pollux) run first; their GPUs serve this cycle.
4. **admit + place** — reject what can never run (larger than the cluster), hold what breaks a
   quota, then walk the order; each job is placed all-or-nothing by ``topology`` at its wanted
   size, or smaller down to its minimum if starting small beats waiting (``elastic``). ``strict``
   stops at the first miss, ``backfill`` reserves the head's start (EASY), ``greedy`` skips.
5. **preempt** — for jobs still waiting: with a quota tree, first *reclaim* borrowed GPUs for
   jobs inside their team's guarantee (``reclaim``); then shrink elastic lower work, then preempt
   whole jobs, within the class rules, budgets and cascade damping (``preemption``); signal +
   grace. Steps 4 and 5 run one priority class at a time, higher first, so a lower class never
   takes the free GPUs a higher class could have combined with a shrink or an eviction.
   5a. **defrag** (``CycleConfig.defrag``, off by default) — small jobs are moved out of a nearly
   free leaf/NVLink block onto fragmented ones for the first waiting gang that needs a whole one,
   when the gang's gain pays the moves (``phases/defrag.py``, issue 21).
   5b. **migrate** — running gangs whose links degraded (link health) are checkpointed and
   re-placed when the payback rule says the saving beats the cost, within the budgets
   (``migration``, DESIGN R-T8).
   5c. **upgrade** — on a cluster of several GPU types, running jobs move onto a faster type's
   GPUs that no waiting job took, when the time saved pays the move (``phases/upgrade.py``).
6. **grow**    — grow running elastic jobs toward the plan's targets with anti-churn rules.
7. **emit**    — actions in order (shrinks, preempts, starts, grows, node tags, priorities) and
   one reason per waiting job; nodes the link health quarantines get a ``TagNode``.

A gang shape that failed on the free GPUs fails again until GPUs are given back (a shrink, a
released hold): such misses are cached (``Draft._failed``, ``model/signature.py``). Jobs the
place phase treats as the same share a scheduling signature (``model/signature.py``): while the
free GPUs and the queue's head are unchanged, the second gets the first one's verdict without a
search (``Decision.steps`` counts both kinds of turn).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from operator import attrgetter
from types import MappingProxyType

from railgang.daemon.core.model import elastic
from railgang.daemon.core.model import preemption as pre
from railgang.daemon.core.model.actions import Action, SetPriority, TagNode
from railgang.daemon.core.model.gang import Placer, topology_placer
from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.plan import Plan, Policy, Want
from railgang.daemon.core.model.reasons import PendingReason, Reason
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.model.spares import SpareRules, spare_nodes
from railgang.daemon.core.phases.defrag import DefragRules, defrag_phase
from railgang.daemon.core.phases.draft import Draft
from railgang.daemon.core.phases.evict import EvictPhase
from railgang.daemon.core.phases.migrate import MigrationRules, migrate_phase
from railgang.daemon.core.phases.place import PlacePhase
from railgang.daemon.core.phases.reclaim import ReclaimPhase
from railgang.daemon.core.phases.size import grow_phase, shrink_phase
from railgang.daemon.core.phases.upgrade import UpgradeRules, upgrade_phase
from railgang.topology.health import LinkHealth

log = logging.getLogger(__name__)
_JOB_ID = attrgetter("request.job_id")  # job id of a waiting job (the cycle's id -> job map)
PHASES = ("observe", "order", "size", "place", "preempt", "migrate", "grow", "emit")


@dataclass(frozen=True)
class CycleConfig:
    budget: pre.PreemptionBudget = field(default_factory=pre.PreemptionBudget)
    elastic: elastic.ElasticRules = field(default_factory=elastic.ElasticRules)
    preempt: bool = True  # allow the preempt phase at all
    resize: bool = True  # allow the size and grow phases at all
    emit_priorities: bool = False  # also emit SetPriority per waiting job (backends that reorder
    # Slurm's own queue); rank = position in the final order, larger = sooner
    lame_link_tag: str = "lame-link"  # TagNode for nodes the link health quarantines
    # Bounded waiting for a leaf (docs/policies.md "Keeping gangs inside one leaf"): a multi-node
    # gang that one leaf could hold, but that would now be placed across leaves, waits
    # (``waiting_for_leaf``) until leaf_wait_s after its submit time, and while it waits for a
    # leaf or for GPUs it holds the free GPUs of one leaf from later jobs (at most leaf_holds
    # leaves per cycle). 0 = off (the core's default: simulated schedules stay as pinned; the
    # daemon turns it on, DaemonSettings.leaf_wait_s). Past leaf_wait_s and up to
    # leaf_wait_max_s it keeps waiting only while a leaf is expected to have room before
    # leaf_wait_max_s runs out (phases/leaf_wait.py); leaf_wait_max_s <= leaf_wait_s: none.
    leaf_wait_s: float = 0.0
    leaf_holds: int = 2
    leaf_wait_max_s: float = 0.0
    # with leaf_wait_s: a gang that needs a whole leaf holds one before the jobs ahead of it in
    # the order are placed even when a leaf has room now (they may start anywhere but there);
    # else smaller gangs ahead of it take each leaf as it frees (issue 21: 52 -> 17 s in the sim)
    whole_leaf_first: bool = False
    # with leaf_wait_s: a job that would wait starts on a held leaf's GPUs when it is expected to
    # end before that leaf's holder expects room there (EASY backfill per held leaf; issue 21)
    backfill_held_leaf: bool = False
    # R-T8: move running gangs off degraded links when the payback rule says so (core/phases/migrate.py;
    # a no-op while the link health is None or all healthy, e.g. every pinned simulation)
    migration: MigrationRules = field(default_factory=MigrationRules)
    upgrade: UpgradeRules = field(default_factory=UpgradeRules)  # several GPU
    # types: move running jobs onto a faster type's idle GPUs when it pays (a no-op on one pool)
    # hot spares (issue 20): idle nodes kept in large gangs' leaves for their restart, lent to
    # short class-3 work (model/spares.py); per_leaf = 0, the default: off, schedules unchanged
    spares: SpareRules = field(default_factory=SpareRules)
    # issue 21: a multi-node gang evicts whole jobs inside one leaf/NVLink block (or whole leaves),
    # never a scatter over nodes (core/phases/evict_domain.py); off: pinned schedules unchanged
    whole_domain_evict: bool = False
    defrag: DefragRules = field(default_factory=DefragRules)  # issue 21: move small jobs out of a
    # nearly free leaf for a waiting gang when it pays (core/phases/defrag.py; off by default)


@dataclass(frozen=True)
class Decision:
    actions: tuple[Action, ...]
    reasons: Sequence[PendingReason]  # in the queue's order, each built when read (equals the
    # tuple of them: ``phases/waiting.py``; a long queue's are mostly never read by the simulator)
    phase_ms: Mapping[str, float] = field(default_factory=dict, compare=False, repr=False)
    # the place phase's turns: "searched" (admission checks and a start attempt ran) and
    # "skipped" (a job given the verdict of an earlier one of its signature, model/signature.py)
    steps: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def reason(self, job_id: str) -> PendingReason | None:
        return next((r for r in self.reasons if r.job_id == job_id), None)

    def of(self, kind: type[Action]) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if isinstance(a, kind))


def decide(
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    rng: random.Random,
    *,
    config: CycleConfig = CycleConfig(),
    placer: Placer = topology_placer,
) -> Decision:
    """Run one cycle (see the module docstring for the recipe)."""
    clock, ms = time.perf_counter(), dict.fromkeys(PHASES, 0.0)

    def lap(phase: str) -> None:
        nonlocal clock
        t = time.perf_counter()
        ms[phase] += (t - clock) * 1e3
        clock = t

    quarantined, released = _quarantined(snapshot, config.lame_link_tag)
    snapshot = _with_quarantine(snapshot, quarantined)  # a what-if the placer sees (STYLE 2)
    d = Draft(snapshot, now, placer, rng.randrange(2**31),  # 1. observe
              shrink_grace_s=config.elastic.shrink_grace_s)
    if config.spares.on:  # hot spares: held from everything but restarts and short work
        d.keep_spares(spare_nodes(snapshot, config.spares), config.spares)
    lap("observe")
    plan = policy.plan(snapshot, now)  # 2. order
    jobs = dict(zip(map(_JOB_ID, snapshot.pending), snapshot.pending, strict=True))
    classes = _by_class(plan, jobs, snapshot)
    order = classes[0] if len(classes) == 1 else [x for batch in classes for x in batch]
    lap("order")
    if config.resize:  # 3. size: shrinks the plan asks for free GPUs for this cycle's starts
        shrink_phase(d, plan, config.elastic)
    lap("size")
    placing = PlacePhase(d, plan, leaf_wait_s=config.leaf_wait_s, leaf_holds=config.leaf_holds,
                         leaf_wait_max_s=config.leaf_wait_max_s, whole_leaf_first=config.whole_leaf_first,
                         leaf_evict_after_s=config.budget.domain_patience_s if config.whole_domain_evict else None,
                         backfill_held_leaf=config.backfill_held_leaf)
    evicting = EvictPhase(d, plan, config.budget, config.elastic, whole_domain=config.whole_domain_evict)
    reclaiming = ReclaimPhase(d, config.budget) if snapshot.quotas is not None else None
    for this_class in classes:  # 4-5. one priority class at a time, higher classes first:
        placing.run(this_class, jobs)  # 4. admit + place
        lap("place")
        if config.preempt and reclaiming is not None:  # 5a. reclaim borrowed GPUs for
            reclaiming.run(this_class, jobs)  # guaranteed jobs (quota tree only)
        if config.preempt:  # 5. preempt: shrink lower work first, then evict within budgets
            evicting.run(this_class, jobs)
        lap("preempt")
    if config.preempt and config.defrag.enabled:  # 5a. consolidate a leaf for a waiting gang
        defrag_phase(d, config.defrag, config.migration, config.budget, [x.job_id for x in order])
    if config.preempt:  # 5b. migrate running gangs off degraded links when it pays back (R-T8)
        migrate_phase(d, config.migration, config.budget)
    if config.preempt:  # 5c. move running jobs onto faster GPU types left idle (phases/upgrade.py)
        upgrade_phase(d, plan, config.upgrade, config.budget)
    lap("migrate")
    if config.resize:  # 6. grow elastic jobs into what is left, if the marginal gain pays
        grow_phase(d, plan, config.elastic)
    lap("grow")
    for j in list(d.without_reason(snapshot.pending)):  # 7. emit: every job left waiting has a reason
        d.wait(j, Reason.PRIORITY, "not ordered by the policy this cycle", j.min_gpus)
    hygiene: list[Action] = [
        TagNode(n, config.lame_link_tag) for n in sorted(quarantined)
        if n in snapshot.nodes and config.lame_link_tag not in snapshot.nodes[n].tags
    ]
    hygiene += [TagNode(n, config.lame_link_tag, remove=True) for n in released]
    if config.emit_priorities:
        waiting = [x.job_id for x in order if x.job_id not in d.started]
        hygiene += [SetPriority(j, len(waiting) - i) for i, j in enumerate(waiting)]
    actions = (*d.actions(), *hygiene)
    reasons = d.reasons(snapshot.pending)
    lap("emit")
    if log.isEnabledFor(logging.DEBUG):
        log.debug("cycle %s now=%.0f pending=%d actions=%d phases=%s", policy.name, now,
                  len(snapshot.pending), len(actions), {k: round(v, 2) for k, v in ms.items()})
    steps = MappingProxyType({"searched": placing.searched, "skipped": placing.skipped})
    return Decision(actions, reasons, MappingProxyType(ms), steps)


def _by_class(plan: Plan, jobs: Mapping[str, Job], snapshot: Snapshot) -> list[list[Want]]:
    """The plan's order split by priority class, higher classes first; a job a node failure
    requeued goes first in its class (docs/failures.md); else the policy's rank is kept. With
    one kind (the snapshot's index counts them) the plan's order is already the split.
    (``Plan.order`` names waiting jobs only.)"""
    order = list(plan.order)
    if snapshot.index.queue.kinds <= 1:
        return [order] if order else []
    order.sort(key=lambda x: (jobs[x.job_id].priority_class, not jobs[x.job_id].state.after_fault))
    return [list(batch) for _, batch in groupby(order, key=lambda x: jobs[x.job_id].priority_class)]


def _quarantined(snapshot: Snapshot, tag: str) -> tuple[set[str], list[str]]:
    """Nodes the topology link health quarantines, and nodes that already carry the lame-link
    tag: the tag lives in Slurm (the CLI backend's node feature ``rg_<tag>``), so a quarantine
    outlives the daemon process and the link data that caused it. Second: tagged nodes a live
    collector vouches for again (``health.observed``, not quarantined), whose tag comes off."""
    q = getattr(snapshot.health, "quarantined", None) or {}
    observed = getattr(snapshot.health, "observed", None) or frozenset()
    tagged = {n for n, node in snapshot.nodes.items() if tag in node.tags}
    released = sorted(n for n in tagged if n in observed and n not in q)
    return set(q) | (tagged - set(released)), released


def _with_quarantine(snapshot: Snapshot, quarantined: set[str]) -> Snapshot:
    """The snapshot whose link health quarantines ``quarantined`` too, so the placer keeps
    multi-node gangs off tagged nodes (single-node jobs may still use them)."""
    health = snapshot.health
    known = getattr(health, "quarantined", None) or {}
    extra = {n: "tagged lame-link" for n in sorted(quarantined) if n not in known}
    if not extra:
        return snapshot
    merged = MappingProxyType({**known, **extra})
    health = LinkHealth(quarantined=merged) if health is None else dataclasses.replace(health, quarantined=merged)
    return snapshot.replace(health=health)


__all__ = ["CycleConfig", "Decision", "decide"]
