"""The report as plain data: what ``build`` computes and ``render`` writes (HTML, CSV, JSON).

Units are in the field names: ``_gpu_h`` GPU-hours, ``_pct`` percent, ``_s`` seconds; money is in
the ledger's rate currency. ``None`` means "not measured" (no telemetry, no quota, no rate),
never zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from railgang.daemon.report.detectors.base import Anomaly

CLASS_NAMES = {0: "serving", 1: "production", 2: "interactive", 3: "batch"}  # DESIGN R-S7


@dataclass(frozen=True, slots=True)
class TeamRow:
    team: str
    department: str | None
    guaranteed_gpus: int | None
    limit_gpus: int | None
    quota_gpu_h: float | None  # guarantee x hours of the window
    allocated_gpu_h: float
    compute_gpu_h: float | None
    productive_gpu_h: float | None
    quota_use_pct: float | None  # allocated / quota
    showback: float  # allocated GPU-hours x rate (what the use cost)
    chargeback: float  # what the team is billed: the guarantee it holds, or its use if more
    unpriced_gpu_h: float


@dataclass(frozen=True, slots=True)
class JobRow:
    job: str
    team: str
    user: str
    gpus: int
    gpu_type: str
    gpu_h: float
    compute_pct: float | None
    productive_pct: float | None
    cost: float


@dataclass(frozen=True, slots=True)
class PoolRow:
    pool: str  # GPU type
    gpus: int
    capacity_source: str  # config | inventory (node_states) | telemetry | peak allocation
    allocated_gpu_h: float
    util_pct: float  # allocated over capacity
    compute_pct: float | None
    productive_pct: float | None
    fragmentation_index: float | None  # mean stranded / free (R-T9)
    stranded_gpu_h: float | None  # free GPU-hours no waiting gang could use, while jobs waited
    nodes: int = 0  # nodes counted in ``gpus`` (0: size from config or peak allocation)


@dataclass(frozen=True, slots=True)
class ClassRow:
    priority_class: int
    name: str
    mean_depth: float
    max_depth: int
    waiting_at_end: int
    started: int
    wait_p50_s: float | None
    wait_p90_s: float | None


@dataclass(frozen=True, slots=True)
class Chaos:
    preemptions: int
    resizes: int
    spot_interruptions: int
    lost_gpu_h: float  # (preemptions + fault restarts) x GPUs x report.preemption_tax_s
    lost_cost: float
    by_team: dict[str, dict[str, float]] = field(default_factory=dict)
    fault_restarts: int = 0  # runs ended by a node going down, then run again (no preemption)


@dataclass(frozen=True, slots=True)
class UserRow:
    user: str
    team: str
    allocated_gpu_h: float
    compute_gpu_h: float | None
    productive_gpu_h: float | None
    cost: float


@dataclass(frozen=True, slots=True)
class EndedRow:
    """A job that failed, was cancelled or timed out in the window."""

    job: str
    team: str
    user: str
    gpus: int
    state: str
    ended: int | None
    gpu_h: float  # GPU-hours it held in the window


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A node down or drained during the window."""

    node: str
    gpu_type: str
    gpus: int
    state: str
    reason: str
    since: int
    until: int | None  # None: still so at the end of the window
    lost_gpu_h: float  # GPUs x the part of the window it was unavailable


@dataclass(frozen=True, slots=True)
class TeamWaitRow:
    team: str
    started: int
    wait_p50_s: float | None
    wait_p90_s: float | None
    wait_max_s: float | None
    waiting_at_end: int


@dataclass(frozen=True, slots=True)
class Trend:
    """Allocated GPU-hours per day over the last days up to the window's last day."""

    days: list[str]
    fleet_gpu_h: list[float]
    fleet_pct: list[float | None]  # of today's capacity (the inventory of the window)
    teams: dict[str, list[float]]


@dataclass(frozen=True, slots=True)
class AnomalyGroup:
    """Findings of one kind for one team (``team`` None: the fleet's), ranked by ``cost``, the
    sum of what is at stake in them; ``detail``/``suggestion`` are the costliest finding's."""

    kind: str
    team: str | None
    count: int
    cost: float | None
    unit: str
    detail: str
    suggestion: str
    subjects: list[str]  # every finding's subject (job ids, the team, "fleet"), costliest first
    first_at: float | None
    last_at: float | None


@dataclass
class Report:
    date: str
    since: int
    until: int
    generated_at: str
    teams_scope: list[str] | None  # None: the whole fleet (an admin's report)
    totals: dict[str, float | None]
    teams: list[TeamRow]
    top_jobs: list[JobRow]
    pools: list[PoolRow]
    queue: list[ClassRow]
    chaos: Chaos
    anomalies: list[Anomaly]
    series: dict[str, list[float]]  # chart data: "t", "util_pct", "power_w", "alloc_pct", ...
    notes: list[str] = field(default_factory=list)
    currency: str = "USD"
    team_totals: dict[str, float | None] = field(default_factory=dict)  # the teams' totals row
    users: list[UserRow] = field(default_factory=list)
    ended: list[EndedRow] = field(default_factory=list)
    nodes_down: list[NodeRow] = field(default_factory=list)
    team_waits: list[TeamWaitRow] = field(default_factory=list)
    trend: Trend | None = None
    anomaly_groups: list[AnomalyGroup] = field(default_factory=list)  # anomalies.grouped
    # the day is not over: the window ends at ``until`` (when it was built), not at midnight;
    # the daemon rebuilds today's so far and the nightly run overwrites it with the whole day
    partial: bool = False

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["anomalies"] = [a.as_dict() for a in self.anomalies]
        return d


__all__ = ["CLASS_NAMES", "AnomalyGroup", "Chaos", "ClassRow", "EndedRow", "JobRow", "NodeRow", "PoolRow",
           "Report", "TeamRow", "TeamWaitRow", "Trend", "UserRow"]
