"""What the failure step reads (issue 34 item 2): the jobs and nodes as Slurm shows them, who
sets node reasons, the burn-in reservations railgang made. A backend builds these while it
observes (``daemon/slurm/cli/failures.py``) and hands them to the pipeline; the decisions are
``respond.py``'s and ``step.py``'s, which no backend imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class JobView:
    """One job as Slurm shows it this cycle (railgang's or not: any job's kill counts)."""

    job_id: str
    state: str  # Slurm's job state: RUNNING, PENDING, NODE_FAIL, ...
    restarts: int  # restart_cnt
    nodes: tuple[str, ...] = ()  # the nodes it holds (running) or ran on (ended)
    railgang_requeue: bool = False  # this restart count is one railgang's preemption/grow made
    may_requeue: bool = True  # Slurm's ``requeue`` flag (False: the user said --no-requeue)
    ours: bool = False  # a railgang job (the core places it; only those get ``after_fault``)
    # the training helper's last report: (epoch seconds it was sent, step, seconds per step or
    # None); None without one. ``started_at``: when this run started (Slurm's start_time)
    progress: tuple[float, float, float | None] | None = None
    started_at: float = 0.0
    burn_in_of: str = ""  # a railgang burn-in job: the node it tests


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    state: str  # records.node_state's vocabulary: idle | mixed | alloc | drain | down
    reason: str = ""
    busy: bool = False  # a job still runs on it
    reason_by: str = ""  # who set ``reason`` (sinfo's reason_set_by_user; "": not shown)


@dataclass(frozen=True, slots=True)
class Setters:
    """Who sets node reasons (module rule 5): slurm.conf's ``SlurmUser`` (Slurm itself) and the
    daemon's own user ("": not known, then any ``railgang:`` reason is railgang's)."""

    slurm_user: str = "slurm"
    daemon_user: str = ""


@dataclass(frozen=True, slots=True)
class FailureFacts:
    """One observation's worth of what the failure step reads."""

    jobs: tuple[JobView, ...] = ()  # every job Slurm shows, ended ones included
    nodes: Mapping[str, NodeView] = field(default_factory=lambda: MappingProxyType({}))
    setters: Setters = Setters()
    # the nodes of the burn-in reservations railgang made (read until Slurm answers once: the
    # restarted daemon takes them over, adopt.py); None: not read (yet)
    reserved: tuple[str, ...] | None = None


__all__ = ["FailureFacts", "JobView", "NodeView", "Setters"]
