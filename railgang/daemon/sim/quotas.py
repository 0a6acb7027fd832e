"""Quotas in the simulator: the ``--quotas`` file, borrowed GPU-hours, guarantee attainment.

The file is TOML (a small tree; every key is checked, errors name the file, table and field)::

    [org]                       # optional: a cap over everybody
    name = "philly"
    guaranteed = 128
    limit = 128                 # optional burst limit (default: none)

    [[department]]              # optional
    name = "research"
    guaranteed = 64
    limit = 96

    [[team]]                    # a team is a trace account (Philly: a virtual cluster)
    name = "6214e9"
    department = "research"     # optional: else directly under the org (or the root)
    guaranteed = 32
    limit = 64

The tree must pass the same hierarchy rules the database enforces (``quota.check_hierarchy``).
:class:`QuotaUse` follows the simulated cluster: GPUs per account over time (for borrowed
GPU-hours and the use-it-or-lose-it review) and reclaim preemptions. :func:`attainment` reports, per team,
how long its jobs waited that arrived inside its guarantee (what the team already ran and queued,
plus the job, fit in it: the promise a guarantee makes).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from railgang.daemon.core.model.quota import QuotaNode, QuotaTree, check_hierarchy
from railgang.daemon.core.model.quota_review import (
    LoseItProposal,
    LoseItRules,
    proposals_from_means,
)
from railgang.daemon.inputs import QUOTAS_MAX_BYTES, read_toml
from railgang.daemon.safe_output import term_text
from railgang.daemon.sim.metrics import JobRecord
from railgang.errors import InputError

_KEYS = {"org": {"name", "guaranteed", "limit"},
         "department": {"name", "guaranteed", "limit", "org"},
         "team": {"name", "guaranteed", "limit", "department"}}
_LEVEL = {"org": "org", "department": "dept", "team": "team"}


def _int(path: str, where: str, raw: Mapping[str, Any], key: str, *, required: bool) -> int | None:
    v = raw.get(key)
    if v is None:
        if required:
            raise InputError(f"{where}: '{key}' is missing (a whole number of GPUs)", path=path,
                             field=f"{where}.{key}")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(f"{where}: '{key}' must be a whole number of GPUs >= 0, got {v!r}",
                         path=path, field=f"{where}.{key}")
    return v


def _node(path: str, kind: str, i: int | None, raw: Any, parent: str | None) -> QuotaNode:
    where = kind if i is None else f"{kind}[{i}]"
    if not isinstance(raw, dict):
        raise InputError(f"{where} must be a table", path=path, field=where)
    unknown = sorted(set(raw) - _KEYS[kind])
    if unknown:
        raise InputError(f"{where}: unknown key '{unknown[0]}' (known: "
                         f"{', '.join(sorted(_KEYS[kind]))})", path=path, field=f"{where}.{unknown[0]}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{where}: 'name' must be a non-empty string", path=path, field=f"{where}.name")
    g = _int(path, where, raw, "guaranteed", required=True)
    assert g is not None
    return QuotaNode(name.strip(), _LEVEL[kind], parent, g, _int(path, where, raw, "limit", required=False))


def load_quotas(path: Path) -> QuotaTree:
    """The tree in ``path``; ``InputError`` (one line: file, field, what to do) otherwise."""
    p = str(path)
    data = read_toml(path, "quotas file", limit=QUOTAS_MAX_BYTES)  # bounded, regular files only
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise InputError(f"unknown table '{unknown[0]}' (expected [org], [[department]], [[team]])",
                         path=p, field=unknown[0])
    nodes: dict[str, QuotaNode] = {}

    def add(n: QuotaNode, where: str) -> None:
        if n.name in nodes:
            raise InputError(f"{where}: name '{n.name}' is used twice", path=p, field=f"{where}.name")
        nodes[n.name] = n

    org = _node(p, "org", None, data["org"], None) if "org" in data else None
    if org is not None:
        add(org, "org")
    root = org.name if org else None
    for kind, parent_key in (("department", None), ("team", "department")):
        rows = data.get(kind, [])
        if not isinstance(rows, list):
            raise InputError(f"'{kind}' must be an array of tables ([[{kind}]])", path=p, field=kind)
        for i, raw in enumerate(rows):
            parent = root
            if parent_key is not None and isinstance(raw, dict) and raw.get(parent_key) is not None:
                parent = str(raw[parent_key])
                if nodes.get(parent) is None or nodes[parent].level != "dept":
                    raise InputError(f"{kind}[{i}]: department '{parent}' is not defined above it",
                                     path=p, field=f"{kind}[{i}].{parent_key}")
            if kind == "department" and isinstance(raw, dict) and raw.get("org") not in (None, root):
                raise InputError(f"department[{i}]: org '{raw.get('org')}' is not the [org] table",
                                 path=p, field=f"department[{i}].org")
            add(_node(p, kind, i, raw, parent), f"{kind}[{i}]")
    if not any(n.level == "team" for n in nodes.values()):
        raise InputError("no [[team]] tables: name at least one team (a trace account)", path=p)
    failures = check_hierarchy(nodes)
    if failures:
        key, problem = sorted(failures.items())[0]
        raise InputError(f"{key}: {problem}" + (f" (and {len(failures) - 1} more)"
                                                 if len(failures) > 1 else ""), path=p, field=key)
    return QuotaTree(nodes)


@dataclass
class QuotaUse:
    """GPUs per account over simulated time: borrowed GPU-seconds, reclaim preemptions, and the
    use-it-or-lose-it review as the daemon runs it (hourly marks; a team is proposed when its
    mean allocation over the last ``rules.window_s`` falls under the threshold, and again only
    after it has been above it in between)."""

    tree: QuotaTree
    rules: LoseItRules = field(default_factory=LoseItRules)
    review_every_s: float = 3600.0
    borrowed_gpu_s: dict[str, float] = field(default_factory=dict)
    reclaimed: dict[str, int] = field(default_factory=dict)  # preemptions suffered, per account
    proposed: list[LoseItProposal] = field(default_factory=list)
    _area: dict[str, float] = field(default_factory=dict)  # GPU-seconds held so far
    _marks: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    _open: set[str] = field(default_factory=set)  # teams with a proposal not yet outgrown
    within: set[str] = field(default_factory=set)  # jobs that arrived inside their guarantee
    _last: tuple[float, dict[str, int]] | None = None

    def observe(self, now: float, alloc: Mapping[str, int]) -> None:
        """The cluster holds ``alloc`` GPUs per account from ``now`` on."""
        if self._last is not None:
            t0, before = self._last
            for acc, g in before.items():
                if now > t0:
                    self._area[acc] = self._area.get(acc, 0.0) + g * (now - t0)
                over = g - self.tree.guaranteed(acc)
                if over > 0 and now > t0:
                    self.borrowed_gpu_s[acc] = self.borrowed_gpu_s.get(acc, 0.0) + over * (now - t0)
        self._last = (now, {a: g for a, g in alloc.items() if g})
        if not self._marks or now - self._marks[-1][0] >= self.review_every_s:
            self._marks.append((now, dict(self._area)))
            self._review(now)

    def _review(self, now: float) -> None:
        times = [t for t, _ in self._marks]
        i = bisect.bisect_right(times, now - self.rules.window_s) - 1
        if i < 0:
            return  # less than a window of history
        t0, before = self._marks[i]
        means = {n: (self._area.get(n, 0.0) - before.get(n, 0.0)) / (now - t0)
                 for n in self.tree.nodes}
        idle = {p.account: p for p in proposals_from_means(self.tree, means, now, self.rules)}
        for team in sorted(idle.keys() - self._open):
            self.proposed.append(idle[team])
        self._open = set(idle)

    def reclaim(self, account: str) -> None:
        self.reclaimed[account] = self.reclaimed.get(account, 0) + 1

    def arrived(self, job_id: str, account: str, demand: int) -> None:
        """A job arrived while its account ran and queued ``demand`` GPUs (itself included): if
        that is inside the guarantee, the guarantee promises it a prompt start."""
        if 0 < demand <= self.tree.guaranteed(account):
            self.within.add(job_id)


@dataclass(frozen=True)
class TeamAttainment:
    team: str
    guaranteed: int
    jobs: int  # jobs of the team that arrived inside its guarantee (with what it ran and queued)
    started: int
    mean_wait_s: float
    p95_wait_s: float
    borrowed_gpu_h: float
    reclaimed: int  # its jobs preempted to give borrowed GPUs back

    def to_json(self) -> dict[str, Any]:
        return {"team": self.team, "guaranteed_gpus": self.guaranteed, "jobs_within_guarantee":
                self.jobs, "started": self.started, "mean_wait_s": round(self.mean_wait_s, 1),
                "p95_wait_s": round(self.p95_wait_s, 1),
                "borrowed_gpu_h": round(self.borrowed_gpu_h, 2), "reclaimed": self.reclaimed}


def _p95(xs: list[float]) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(0.95 * len(s)) - 1)]


def attainment(records: Iterable[JobRecord], use: QuotaUse) -> list[TeamAttainment]:
    """Per team of the tree: waits of its jobs that arrived inside its guarantee — what the team
    already ran and queued, plus the job, fit in it (unstarted jobs are left out of the waits and
    show as ``jobs - started``)."""
    waits: dict[str, list[float]] = {}
    asked: dict[str, int] = {}
    for r in records:
        node = use.tree.nodes.get(r.account)
        if node is None or node.level != "team" or r.rejected or r.job_id not in use.within:
            continue
        asked[r.account] = asked.get(r.account, 0) + 1
        if r.queueing is not None:
            waits.setdefault(r.account, []).append(r.queueing)
    out = []
    for name, node in use.tree.nodes.items():
        if node.level != "team":
            continue
        w = waits.get(name, [])
        out.append(TeamAttainment(name, node.guaranteed, asked.get(name, 0), len(w),
                                  sum(w) / len(w) if w else 0.0, _p95(w),
                                  use.borrowed_gpu_s.get(name, 0.0) / 3600,
                                  use.reclaimed.get(name, 0)))
    return out




def quota_report(records: Iterable[JobRecord], use: QuotaUse) -> dict[str, Any]:
    """The ``--json`` section of one run: attainment per team, totals, lose-it proposals."""
    teams = attainment(records, use)
    return {"teams": [t.to_json() for t in teams],
            "borrowed_gpu_h": round(sum(use.borrowed_gpu_s.values()) / 3600, 2),
            "reclaims": sum(use.reclaimed.values()),
            "lose_it_proposals": [{"team": p.account, "at_h": round(p.until / 3600, 1),
                                   "guaranteed_gpus": p.guaranteed,
                                   "mean_gpus": round(p.mean_gpus, 2), "detail": p.detail()}
                                  for p in use.proposed]}


def quota_table(policy: str, report: Mapping[str, Any]) -> Table:
    """Guarantee attainment per team, as the terminal shows it."""
    t = Table(title=f"{policy}: guarantee attainment (jobs that arrived inside the team's "
                    "guarantee, counting what it ran and queued); "
                    f"borrowed {report['borrowed_gpu_h']:,.1f} GPU-h, {report['reclaims']} reclaims")
    for col in ("team", "guarantee", "jobs", "started", "mean wait", "p95 wait", "borrowed GPU-h",
                "reclaimed"):
        t.add_column(col, justify="left" if col == "team" else "right")
    for r in report["teams"]:
        t.add_row(term_text(r["team"]), str(r["guaranteed_gpus"]), str(r["jobs_within_guarantee"]),
                  str(r["started"]), _dur(r["mean_wait_s"]), _dur(r["p95_wait_s"]),
                  f"{r['borrowed_gpu_h']:,.1f}", str(r["reclaimed"]))
    return t


def _dur(s: float) -> str:
    return f"{s / 3600:.2f} h" if s >= 3600 else f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"


__all__ = ["QuotaUse", "TeamAttainment", "attainment", "load_quotas", "quota_report", "quota_table"]
