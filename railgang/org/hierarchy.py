"""The quota tree's shape and its two pure rules (DESIGN R-Q1, R-Q2): ``check_hierarchy`` (a
change that breaks the tree is refused, naming every failing field) and ``effective_quota``
(``Q_eff``, the level that binds). They sit below every room that needs them: the database
checks the tree before a change commits, the API serves ``Q_eff``, the decision core gates
starts on the same tree (``daemon/core/model/quota.py``). Nothing here imports the rest of
railgang.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ANY_GPU = "*"


@dataclass(frozen=True, slots=True)
class QuotaNode:
    """One account of the tree with its quota for one GPU type (or ``*``)."""

    name: str
    level: str  # org | dept | team
    parent: str | None
    guaranteed: int
    limit: int | None
    # False: the account has no quota of its own for this GPU type and stands in with its
    # overall one; it bounds its children but is not checked against its parent
    own: bool = True

    @property
    def cap(self) -> int | None:
        if self.limit is not None:
            return self.limit
        return self.guaranteed if self.guaranteed > 0 else None


@dataclass(frozen=True, slots=True)
class LevelHeadroom:
    account: str
    level: str
    cap: int | None  # Q of this level
    others_allocated: int  # allocation under this level, the team's own excepted
    headroom: int | None  # cap − others_allocated (None: no cap)


@dataclass(frozen=True, slots=True)
class EffectiveQuota:
    team: str
    gpu_type: str
    allocated: int  # the team's own GPUs
    q_eff: int | None  # None: nothing caps the team
    binding: str | None  # the account whose level sets q_eff
    levels: tuple[LevelHeadroom, ...]


def children_of(nodes: Mapping[str, QuotaNode]) -> dict[str, list[QuotaNode]]:
    out: dict[str, list[QuotaNode]] = {}
    for n in nodes.values():
        if n.parent is not None:
            out.setdefault(n.parent, []).append(n)
    return out


def check_hierarchy(nodes: Mapping[str, QuotaNode], *, prefix: str = "") -> dict[str, str]:
    """Failing fields as ``{"<account>.<field>": problem}``; empty when the tree is sound."""
    failures: dict[str, str] = {}
    kids = children_of(nodes)
    for n in sorted(nodes.values(), key=lambda x: x.name):
        key = f"{prefix}{n.name}"
        if n.own and n.limit is not None and n.guaranteed > n.limit:
            failures[f"{key}.guaranteed_gpus"] = (
                f"{n.guaranteed} guaranteed is over its own burst limit {n.limit}")
        parent = nodes.get(n.parent) if n.parent is not None else None
        if parent is not None and n.own:
            if n.guaranteed > parent.guaranteed:
                failures[f"{key}.guaranteed_gpus"] = (
                    f"{n.guaranteed} guaranteed is more than {parent.level} {parent.name}'s "
                    f"{parent.guaranteed}")
            if parent.limit is not None and n.limit is not None and n.limit > parent.limit:
                failures[f"{key}.limit_gpus"] = (
                    f"burst limit {n.limit} is over {parent.level} {parent.name}'s {parent.limit}")
        children = [c for c in kids.get(n.name, []) if c.own]
        total = sum(c.guaranteed for c in children)
        if children and total > n.guaranteed:
            names = ", ".join(f"{c.name}={c.guaranteed}" for c in sorted(children,
                                                                          key=lambda c: c.name))
            failures.setdefault(
                f"{key}.guaranteed_gpus",
                f"children are guaranteed {total} together ({names}), more than its "
                f"{n.guaranteed}")
    return failures


def effective_quota(nodes: Mapping[str, QuotaNode], allocated: Mapping[str, int], team: str,
                    *, gpu_type: str = ANY_GPU) -> EffectiveQuota:
    """Q_eff of ``team`` given each account's own allocation (GPUs running now)."""
    kids = children_of(nodes)
    subtree: dict[str, int] = {}

    def total(name: str) -> int:
        if name not in subtree:
            subtree[name] = allocated.get(name, 0) + sum(total(c.name) for c in kids.get(name, []))
        return subtree[name]

    me = nodes[team]
    levels = [LevelHeadroom(me.name, me.level, me.cap, 0, me.cap)]
    parent_name = me.parent
    while parent_name is not None and parent_name in nodes:
        parent = nodes[parent_name]
        others = total(parent.name) - total(me.name)  # everything under it but the team
        room_ = None if parent.cap is None else max(0, parent.cap - others)
        levels.append(LevelHeadroom(parent.name, parent.level, parent.cap, others, room_))
        parent_name = parent.parent
    bound = [lv for lv in levels if lv.headroom is not None]
    best = min(bound, key=lambda lv: lv.headroom or 0) if bound else None
    return EffectiveQuota(team=team, gpu_type=gpu_type, allocated=allocated.get(team, 0),
                          q_eff=None if best is None else best.headroom,
                          binding=None if best is None else best.account, levels=tuple(levels))


__all__ = ["ANY_GPU", "EffectiveQuota", "LevelHeadroom", "QuotaNode", "check_hierarchy", "children_of",
           "effective_quota"]
