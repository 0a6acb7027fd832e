"""The daemon's quota step: the quota tree from the database into every snapshot, and the
use-it-or-lose-it review into quota events.

1. **tree** — each cycle reads the org tree and its quotas (``db.repositories.org.quota_nodes``,
   read-only) and hands the core a ``QuotaTree`` through ``run_cycle(quotas=...)``. With no
   quota set anywhere (every guarantee 0, no burst limit) there is no tree and the core decides
   exactly as without quotas. With ``oversubscription`` > 1 the measured busy share of each
   account's allocated GPUs over the last ``window_s`` (the ledger's ``compute_fraction``)
   goes with the tree, and the core scales the guarantees it supports (DESIGN R-Q2).
2. **review** — at most every ``review_every_s`` the mean allocation of every team over the
   last 72 h (GPU-seconds in the usage ledger / window) is checked against its guarantee
   (``core.quota_review``); a team under 20 % gets a ``lose-proposal`` quota event, unless it
   got one within the window already. Only when the ledger reaches back over the whole window
   (its earliest segment starts before it): a daemon that just started has no evidence yet. An
   admin decides (``railgang quota`` / the API); the daemon never cuts a guarantee itself.

Per-GPU-type quotas (``account_quotas`` rows) are validated and shown by the API; the core
enforces the tree over all GPU types (the ``*`` rows on the accounts).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railgang.daemon.core.model.quota import QuotaTree
from railgang.daemon.core.model.quota_review import (
    LoseItProposal,
    LoseItRules,
    proposals_from_means,
)
from railgang.db.models import Account, UsageRecord
from railgang.db.org import QuotaEvent
from railgang.db.repositories import admin, org

log = logging.getLogger("railgang.daemon")
ACTOR = "railgang-daemon"


def load_tree(s: Session, *, oversubscription: float = 1.0,
              utilisation: Mapping[str, float] | None = None) -> QuotaTree | None:
    """The tree as stored, or None when no account has a guarantee or a burst limit."""
    nodes = org.quota_nodes(s)
    if not any(n.guaranteed > 0 or n.limit is not None for n in nodes.values()):
        return None
    return QuotaTree(nodes, oversubscription=oversubscription, utilisation=utilisation or {})


def _segments(s: Session, since: int, until: int) -> list[tuple[str, int, int, int | None,
                                                               float | None]]:
    q = (select(UsageRecord.account, UsageRecord.gpus, UsageRecord.start_epoch,
                UsageRecord.end_epoch, UsageRecord.compute_fraction)
         .where(UsageRecord.start_epoch < until)
         .where((UsageRecord.end_epoch.is_(None)) | (UsageRecord.end_epoch > since)))
    return [(a, g, st, en, cf) for a, g, st, en, cf in s.execute(q)]


def mean_allocation(s: Session, since: int, until: int) -> dict[str, float]:
    """Mean GPUs each ledger account held over [since, until) (open segments run to ``until``)."""
    area: dict[str, float] = {}
    for acc, gpus, st, en, _ in _segments(s, since, until):
        overlap = min(until, en if en is not None else until) - max(since, st)
        if overlap > 0:
            area[acc] = area.get(acc, 0.0) + gpus * overlap
    return {a: v / (until - since) for a, v in area.items()}


def measured_utilisation(s: Session, since: int, until: int,
                         parents: Mapping[str, str | None]) -> dict[str, float]:
    """Busy share of the allocated GPU-seconds (``compute_fraction``) per account, rolled up
    to every level above it; accounts without telemetry are left out (not measured)."""
    busy: dict[str, float] = {}
    alloc: dict[str, float] = {}
    for acc, gpus, st, en, cf in _segments(s, since, until):
        overlap = min(until, en if en is not None else until) - max(since, st)
        if overlap <= 0 or cf is None:
            continue
        node: str | None = acc
        seen: set[str] = set()
        while node is not None and node not in seen:
            seen.add(node)
            alloc[node] = alloc.get(node, 0.0) + gpus * overlap
            busy[node] = busy.get(node, 0.0) + gpus * overlap * cf
            node = parents.get(node)
    return {a: busy[a] / alloc[a] for a in alloc if alloc[a] > 0}


@dataclass
class QuotaStep:
    """One cycle's quota work (see the module docstring)."""

    oversubscription: float = 1.0  # DaemonSettings.quota_oversubscription (1.0 = off)
    busy_target: float = 0.91
    rules: LoseItRules = field(default_factory=LoseItRules)
    review_every_s: float = 3600.0
    _last_review: float | None = None

    def tree(self, s: Session, now: float) -> QuotaTree | None:
        util: dict[str, float] = {}
        if self.oversubscription > 1.0:
            parents = {n.name: n.parent for n in org.quota_nodes(s).values()}
            util = measured_utilisation(s, int(now - self.rules.window_s), int(now), parents)
        tree = load_tree(s, oversubscription=self.oversubscription, utilisation=util)
        if tree is not None and self.busy_target != tree.busy_target:
            tree = QuotaTree(tree.nodes, oversubscription=tree.oversubscription,
                             busy_target=self.busy_target, utilisation=tree.utilisation)
        return tree

    def review(self, s: Session, tree: QuotaTree | None, now: float) -> list[LoseItProposal]:
        """Record new use-it-or-lose-it proposals (the caller commits); returns them."""
        if tree is None or (self._last_review is not None
                            and now - self._last_review < self.review_every_s):
            return []
        self._last_review = now
        since, until = int(now - self.rules.window_s), int(now)
        first = s.scalar(select(func.min(UsageRecord.start_epoch)))
        if first is None or first > since:
            return []  # the ledger does not reach back over the whole window yet
        means = mean_allocation(s, since, until)
        means = {n: means.get(n, 0.0) for n in tree.nodes}
        recent = datetime.now(UTC) - timedelta(seconds=self.rules.window_s)  # events: wall time
        proposed = set(s.scalars(
            select(Account.name).join(QuotaEvent, QuotaEvent.account_id == Account.id)
            .where(QuotaEvent.kind == "lose-proposal")
            .where((QuotaEvent.state == "proposed") | (QuotaEvent.created_at >= recent))))
        out = []
        for p in proposals_from_means(tree, means, now, self.rules):
            if p.account in proposed:
                continue
            admin.add_event(s, actor=ACTOR, kind="lose-proposal", account=p.account,
                            gpus=p.guaranteed, detail=p.detail())
            log.info("quota: %s", p.detail())
            out.append(p)
        return out


__all__ = ["QuotaStep", "load_tree", "mean_allocation", "measured_utilisation"]
