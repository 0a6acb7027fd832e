"""What the decision core asks a backend to do (immutable, applied in the order emitted).

- :class:`Start`: run a pending job on exactly ``assignment`` (node -> GPU indices) with
  ``replicas`` DP replicas (may be below the requested size when an elastic job starts small).
- :class:`Resize`: change a running elastic job to ``replicas``; ``assignment`` is the complete new
  assignment (a superset of the old one when growing, a subset when shrinking). A shrink with
  ``grace_s > 0`` is a notice: the job is signalled now and shrunk after ``grace_s`` (or once it
  says it is ready); its GPUs stay its own until then (docs/training.md "Shrink notice").
- :class:`Preempt`: signal the job now (panic checkpoint), kill after ``grace_s``; the job goes
  back to the queue. ``for_job`` names the job the GPUs are freed for.
- :class:`Migrate`: checkpoint a running job and restart it on a new assignment (R-T8: its links
  degraded and moving pays back).
- :class:`SetPriority`: hand the job's rank to Slurm (for backends that order Slurm's own queue).
- :class:`DrainNode` / :class:`TagNode`: node hygiene (e.g. limping links from ``topology``).
"""

from __future__ import annotations

from dataclasses import dataclass

from railgang.daemon.core.model.job import Assignment, freeze_assignment, gpu_count
from railgang.daemon.core.model.reasons import Reason


@dataclass(frozen=True)
class Start:
    job_id: str
    assignment: Assignment
    replicas: int
    cost: float = 0.0  # placement locality cost reported by topology

    def __post_init__(self) -> None:
        object.__setattr__(self, "assignment", freeze_assignment(self.assignment))

    @property
    def gpus(self) -> int:
        return gpu_count(self.assignment)


@dataclass(frozen=True)
class Resize:
    job_id: str
    replicas: int
    assignment: Assignment  # the full new assignment
    old_replicas: int = 0
    grace_s: float = 0.0  # a shrink's notice: signal now, shrink after this (0: at once)

    def __post_init__(self) -> None:
        object.__setattr__(self, "assignment", freeze_assignment(self.assignment))

    @property
    def gpus(self) -> int:
        return gpu_count(self.assignment)

    @property
    def grow(self) -> bool:
        return self.replicas > self.old_replicas


@dataclass(frozen=True)
class Preempt:
    job_id: str
    grace_s: float
    reason: Reason = Reason.PRIORITY
    for_job: str | None = None
    gpus: int = 0


@dataclass(frozen=True)
class Migrate:
    """Move a running job off degraded links (R-T8): signal now (checkpoint), kill after
    ``grace_s``, restart on exactly ``assignment`` with ``replicas``. The cycle holds the target
    GPUs that are free now; the rest are the job's own. ``saving_s``/``cost_s``: the payback
    rule's numbers (``core.migration``); ``gpus``: what it holds now (counts as churn)."""

    job_id: str
    grace_s: float
    assignment: Assignment
    replicas: int
    saving_s: float = 0.0
    cost_s: float = 0.0
    gpus: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "assignment", freeze_assignment(self.assignment))


@dataclass(frozen=True)
class SetPriority:
    job_id: str
    priority: int  # larger = sooner (Slurm convention)


@dataclass(frozen=True)
class DrainNode:
    node: str
    reason: str


@dataclass(frozen=True)
class TagNode:
    node: str
    tag: str
    remove: bool = False  # True: take the tag off (the links behind it were repaired)


Action = Start | Resize | Preempt | Migrate | SetPriority | DrainNode | TagNode

__all__ = ["Action", "DrainNode", "Migrate", "Preempt", "Resize", "SetPriority", "Start", "TagNode"]
