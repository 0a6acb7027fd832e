"""Hierarchical quotas in the pure core (DESIGN R-Q1, R-Q2): the tree, its rules, the gate.

The tree is organisation -> department -> team (a team is a Slurm account). Every level has a
guarantee and an optional burst limit; ``Q`` of a level is its limit if it has one, else its
guarantee (a level with neither sets no cap).

1. ``check_hierarchy`` (``railgang/org/hierarchy.py``, shared with the database): a child is guaranteed no more than its parent, the children together no
   more than the parent, a guarantee stays under its own burst limit, a child's limit under its
   parent's. Returns every failing field, so a refusal names all of them at once.
2. ``effective_quota``: ``Q_eff = min(Q_team, Q_dept − Σ other teams' allocation)`` applied at
   every level up the tree (so an organisation cap counts too), naming the level that binds.
3. **Borrowing** (:func:`borrowed_gpus`): an account's *own* guarantee is its guarantee less
   what its children are guaranteed (a team's is its whole guarantee). GPUs an account runs above
   its own guarantee are *borrowed* — the idle guarantees of others, up to the burst limits —
   and stay reclaimable (``railgang.daemon.core.phases.reclaim``). Its earliest-started jobs fill the
   guarantee first, so the newest work is the borrowed work.
4. **The gate** (:func:`gate`, :func:`room`): a start must keep every level at or under its
   ``Q`` (a ``quota_team`` / ``quota_department`` / ``quota_org`` reason names the level, its
   quota and its use). A job that stays inside its account's own guarantee is *guaranteed*:
   when a level above blocks it, the excess there is other accounts' borrowed work (children
   never hold more guarantee than their parent), so reclaim may free it.

Oversubscription (a knob, off by default): with ``QuotaTree.oversubscription`` = f > 1, the
guarantee and limit of a level whose measured utilisation u satisfies u × f ≤ ``busy_target``
(DESIGN: 70 % used × 1.3 = 91 %) are scaled by f; levels without a measurement stay as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.reasons import Reason
from railgang.org.hierarchy import (
    ANY_GPU,
    EffectiveQuota,
    LevelHeadroom,
    QuotaNode,
    check_hierarchy,
    children_of,
    effective_quota,
)

LEVEL_REASON: Mapping[str, Reason] = MappingProxyType({
    "team": Reason.QUOTA_TEAM, "dept": Reason.QUOTA_DEPARTMENT,
    "department": Reason.QUOTA_DEPARTMENT, "org": Reason.QUOTA_ORG,
})
QUOTA_REASONS = (Reason.QUOTA_TEAM, Reason.QUOTA_DEPARTMENT, Reason.QUOTA_ORG)


def _scaled(n: QuotaNode, f: float) -> QuotaNode:
    return QuotaNode(n.name, n.level, n.parent, math.floor(n.guaranteed * f),
                     None if n.limit is None else math.floor(n.limit * f), n.own)


@dataclass(frozen=True)
class QuotaTree:
    """The quota tree a snapshot carries (``Snapshot.quotas``; None = no quotas at all)."""

    nodes: Mapping[str, QuotaNode]
    oversubscription: float = 1.0  # f: guarantees × f where measured use allows (1.0 = off)
    busy_target: float = 0.91  # the busy share u × f may reach (DESIGN: 70 % × 1.3)
    utilisation: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # measured busy share of each account's allocated GPUs (0..1); absent = not measured
    effective: Mapping[str, QuotaNode] = field(init=False, repr=False, compare=False)
    own_guarantee: Mapping[str, int] = field(init=False, repr=False, compare=False)
    ancestors: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.oversubscription < 1.0:
            raise ValueError(f"oversubscription {self.oversubscription} is under 1")
        put = object.__setattr__
        put(self, "nodes", MappingProxyType(dict(sorted(self.nodes.items()))))
        put(self, "utilisation", MappingProxyType(dict(self.utilisation)))
        f = self.oversubscription
        eff = {name: _scaled(n, f) if f > 1.0 and name in self.utilisation
               and self.utilisation[name] * f <= self.busy_target else n
               for name, n in self.nodes.items()}
        put(self, "effective", MappingProxyType(eff))
        kids = children_of(eff)
        put(self, "own_guarantee", MappingProxyType({
            name: max(0, n.guaranteed - sum(c.guaranteed for c in kids.get(name, [])))
            for name, n in eff.items()}))
        anc: dict[str, tuple[str, ...]] = {}
        for name in eff:
            path, p = [], eff[name].parent
            while p is not None and p in eff and p not in path:
                path.append(p)
                p = eff[p].parent
            anc[name] = tuple(path)
        put(self, "ancestors", MappingProxyType(anc))

    def guaranteed(self, account: str) -> int:
        """The account's own guarantee (0 for an account outside the tree)."""
        return self.own_guarantee.get(account, 0)

    def under(self, account: str, level: str) -> bool:
        """Is ``account`` at or below ``level`` in the tree?"""
        return account == level or level in self.ancestors.get(account, ())


@dataclass(frozen=True, slots=True)
class QuotaBlock:
    """A start the tree refuses: the level that binds, its Q and what runs under it."""

    reason: Reason
    account: str  # the account at the binding level ("" for the cluster's free GPUs)
    cap: int
    used: int  # GPUs allocated under the level now
    guaranteed: bool  # the job stays inside its own guarantee: borrowed work may be reclaimed
    detail: str


def _subtree_use(tree: QuotaTree, alloc: Mapping[str, int], level: str) -> int:
    return sum(g for a, g in alloc.items() if g and tree.under(a, level))


def pending_demand(tree: QuotaTree | None, pending: Iterable[Job]) -> dict[str, int]:
    """GPUs waiting jobs ask for inside their account's own guarantee (each job on its own)."""
    out: dict[str, int] = {}
    if tree is None:
        return out
    for j in pending:
        if 0 < j.min_gpus <= tree.guaranteed(j.account):
            out[j.account] = out.get(j.account, 0) + j.min_gpus
    return out


def _held(tree: QuotaTree, alloc: Mapping[str, int], waiting: Mapping[str, int],
          account: str) -> dict[str, int]:
    """GPUs held for other accounts' waiting guaranteed work: their demand, at most the part of
    their own guarantee they do not use."""
    return {a: h for a, d in waiting.items() if a != account
            and (h := min(d, max(0, tree.guaranteed(a) - alloc.get(a, 0)))) > 0}


def gate(tree: QuotaTree | None, alloc: Mapping[str, int], account: str, need: int, *,
         waiting: Mapping[str, int] | None = None, free: int | None = None) -> QuotaBlock | None:
    """None when ``need`` more GPUs of ``account`` keep every level at or under its Q; else the
    binding level (the least room, the lowest on a tie).

    Borrowing takes only *idle* guarantees: for a start above the account's own guarantee, the
    guarantees other accounts' waiting jobs claim (``waiting``, see :func:`pending_demand`) count
    as used at every level above them, and, given the cluster's ``free`` GPUs, those GPUs are not
    free for it either (the job waits as ``priority``, behind the guaranteed work).
    """
    if tree is None or account not in tree.effective:
        return None
    mine = alloc.get(account, 0)
    borrowing = mine + need > tree.guaranteed(account)
    held = _held(tree, alloc, waiting, account) if borrowing and waiting else {}
    worst: tuple[int, str, int, int, int] | None = None  # (room, level, cap, used, held)
    for lv in (account, *tree.ancestors[account]):
        cap = tree.effective[lv].cap
        if cap is None:
            continue
        used = mine if lv == account else _subtree_use(tree, alloc, lv)
        kept = 0 if lv == account else sum(h for a, h in held.items() if tree.under(a, lv))
        if used + kept + need > cap and (worst is None or cap - used - kept < worst[0]):
            worst = (cap - used - kept, lv, cap, used, kept)
    if worst is not None:
        _, lv, cap, used, kept = worst
        node = tree.effective[lv]
        who = "" if lv == account else f" (job of {account})"
        tail = ("; inside its guarantee: reclaiming borrowed GPUs" if not borrowing else
                f"; {kept} held for guaranteed work waiting under it" if kept else "")
        return QuotaBlock(LEVEL_REASON.get(node.level, Reason.QUOTA_TEAM), lv, cap, used,
                          not borrowing, f"{node.level} {lv}{who}: quota {cap} GPUs, {used} in use, "
                                         f"needs {need}{tail}")
    if free is not None and held and need > free - sum(held.values()):
        names = ", ".join(sorted(held))
        return QuotaBlock(Reason.PRIORITY, "", free, sum(held.values()), False,
                          f"borrowing: {sum(held.values())} of {free} free GPUs are held for "
                          f"guaranteed work of {names}")
    return None


def room(tree: QuotaTree | None, alloc: Mapping[str, int], account: str, *,
         waiting: Mapping[str, int] | None = None) -> float:
    """The most GPUs ``account`` may still start (``inf``: no cap): every size up to it passes
    :func:`gate` on the quota levels."""
    if tree is None or account not in tree.effective:
        return math.inf
    mine = alloc.get(account, 0)
    held = _held(tree, alloc, waiting, account) if waiting else {}
    plain = held_room = math.inf
    for lv in (account, *tree.ancestors[account]):
        cap = tree.effective[lv].cap
        if cap is None:
            continue
        used = mine if lv == account else _subtree_use(tree, alloc, lv)
        plain = min(plain, cap - used)
        if lv != account:
            used += sum(h for a, h in held.items() if tree.under(a, lv))
        held_room = min(held_room, cap - used)
    inside = min(plain, tree.guaranteed(account) - mine)  # sizes that do not borrow
    return max(0.0, inside, held_room)


def borrowed_gpus(tree: QuotaTree | None, running: Iterable[RunningJob]) -> dict[str, int]:
    """Borrowed GPUs per running job (jobs with none are left out): per account, jobs in start
    order (then id) fill its own guarantee; what is above it is borrowed."""
    if tree is None:
        return {}
    by_acc: dict[str, list[RunningJob]] = {}
    for r in running:
        by_acc.setdefault(r.job.account, []).append(r)
    out: dict[str, int] = {}
    for acc, runs in by_acc.items():
        left = tree.guaranteed(acc)
        for r in sorted(runs, key=lambda r: (r.start_time, r.job_id)):
            inside = min(left, r.gpus)
            left -= inside
            if r.gpus > inside:
                out[r.job_id] = r.gpus - inside
    return out


__all__ = ["ANY_GPU", "LEVEL_REASON", "QUOTA_REASONS", "EffectiveQuota", "LevelHeadroom",
           "QuotaBlock", "QuotaNode", "QuotaTree", "borrowed_gpus", "check_hierarchy",
           "effective_quota", "gate", "pending_demand", "room"]
