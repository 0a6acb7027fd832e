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
- :class:`Requeue`, :class:`SubmitBurnIn`, :class:`ReleaseBurnIn`, :class:`Resume`: the failure
  step's hands (``failures/step.py``, docs/failures.md): requeue a job a node failure killed or
  that hangs; test a flaky node with a burn-in job inside a reservation of its own; give the
  reservation back; resume a node into it. A backend only carries them out (issue 34 item 2).
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


@dataclass(frozen=True)
class Requeue:
    """Put a job back in the queue now (it ended ``NODE_FAIL`` and Slurm left it, or it hangs)."""

    job_id: str
    reason: str


@dataclass(frozen=True)
class SubmitBurnIn:
    """Test ``node`` with a burn-in job that alone may run there. A backend answers ok with the
    detail ``BURN_IN_DETAIL``: the job's id, which the failure step then waits on."""

    node: str
    reason: str = ""


BURN_IN_DETAIL = "burn-in job {job_id}"  # an applied SubmitBurnIn's detail begins so


@dataclass(frozen=True)
class ReleaseBurnIn:
    """Give back ``node``'s burn-in reservation: its burn-in passed (the node serves again), or
    it failed and the node was drained. ``quiet``: no reservation is no failure."""

    node: str
    reason: str
    quiet: bool = False


@dataclass(frozen=True)
class Resume:
    """Resume ``node`` (into its burn-in reservation, where only the burn-in may run)."""

    node: str
    reason: str


Action = (Start | Resize | Preempt | Migrate | SetPriority | DrainNode | TagNode | Requeue
          | SubmitBurnIn | ReleaseBurnIn | Resume)

__all__ = ["BURN_IN_DETAIL", "Action", "DrainNode", "Migrate", "Preempt", "ReleaseBurnIn",
           "Requeue", "Resize", "Resume", "SetPriority", "Start", "SubmitBurnIn", "TagNode"]
