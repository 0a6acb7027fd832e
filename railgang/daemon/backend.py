"""The one backend seam (STYLE 7): real Slurm, the simulator and the test fake look alike.

A backend observes the cluster as an immutable :class:`~railgang.daemon.core.model.snapshot.Snapshot` and applies
the decision core's actions, reporting one :class:`ActionResult` per action (never raising for an
action the cluster refuses: that is data, like a pending reason). Time is always passed in by the
caller's :class:`~railgang.daemon.clock.Clock`, never read by the backend. Compare httpx: one
``BaseTransport.handle_request`` implemented by the network transport and by ``MockTransport``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What became of one action: applied, or refused with a one-line reason."""

    action: Action
    ok: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A step a backend took on its own while it observed the cluster: the second phase of an
    earlier action whose time came (a preempted job requeued once its grace ran out, a grown job
    restarted at its new size). The journal records each, like the actions it follows."""

    job_id: str
    step: str  # "requeue" | "restart" | "shrink" (after its notice)
    ok: bool
    detail: str  # one line, as logged

    @property
    def line(self) -> str:
        return f"job {self.job_id}: {self.detail}"


@dataclass(frozen=True, slots=True)
class HeldBack:
    """A waiting job whose Start Slurm refused lately (docs/slurm-backend.md, "Refused
    starts"): ``held``, the backend kept it out of the core's queue this cycle (``explain``
    shows it, not the core); else it is back in the queue and ``explain`` adds Slurm's line."""

    job_id: str
    account: str
    priority_class: int
    gpus: int
    needed: int  # its minimum size
    refusals: int  # refused Starts in a row
    reason: str  # Slurm's one line for the latest
    sits_out: int  # cycles it sits out after the latest refusal (0 once left to Slurm)
    left_to_slurm: bool  # its lease was released: Slurm's own checks decide
    held: bool = True  # out of the core's queue this cycle
    # why: "refused" (Slurm refused its Starts), "rules" (a rule of Slurm's railgang does not
    # model, ``reason`` names it: left to Slurm), "dependency" (``reason``: its unmet dependency),
    # "starting" (railgang started it, Slurm has not run it yet; ``reason``: its pin, squeue's reason),
    # "held" (its owner or an admin holds it; ``reason``: squeue's)
    kind: str = "refused"


@runtime_checkable
class Backend(Protocol):
    def snapshot(self, now: float) -> Snapshot:
        """The cluster as of ``now``: nodes, free GPUs, running jobs, the pending queue."""
        ...

    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        """Carry out ``actions`` in order; one result per action, same order."""
        ...


@runtime_checkable
class LeaseBackend(Backend, Protocol):
    """A backend whose waiting jobs sit under a begin-time lease (real Slurm, job_submit.lua)."""

    def renew_leases(self, job_ids: Sequence[str], now: float) -> dict[str, str]:
        """Extend the lease of ``job_ids``; returns ``{job_id: why not}`` for those refused."""
        ...


@runtime_checkable
class ExpiringLeaseBackend(LeaseBackend, Protocol):
    """A lease backend that knows when each lease ends: only those ending soon need renewing."""

    def leases_due(self, job_ids: Sequence[str], now: float) -> list[str]:
        """The jobs among ``job_ids`` (and others it holds under a lease) whose lease ends soon
        or has lapsed: the ones to pass to ``renew_leases`` this cycle."""
        ...


@runtime_checkable
class BackgroundLeaseBackend(ExpiringLeaseBackend, Protocol):
    """A lease backend that can renew on a thread of its own, so a cycle does not wait on the
    renewals (the CLI backend: one slurmctld RPC per lease)."""

    def renew_leases_later(self, job_ids: Sequence[str], now: float) -> tuple[int, dict[str, str]]:
        """Queue ``job_ids`` for renewal and return at once: (leases renewed, ``{job_id: why
        not}``) since the last call. A later Start of a job waits until no renewal of it is
        in flight."""
        ...


@runtime_checkable
class FollowUpBackend(Backend, Protocol):
    """A backend that carries out due second phases while it observes (the CLI backend)."""

    def followups(self) -> Sequence[FollowUp]:
        """What the last ``snapshot`` carried out on its own, for the journal."""
        ...


@runtime_checkable
class HoldingBackend(Backend, Protocol):
    """A backend that keeps some waiting jobs out of the core's queue (the CLI backend's
    back-off of refused Starts)."""

    def held_back(self) -> Sequence[HeldBack]:
        """The waiting jobs with refused Starts on record as of the last ``snapshot``: those
        it left out of the queue (``held``) and those back in it, with Slurm's reason."""
        ...


__all__ = ["ActionResult", "Backend", "BackgroundLeaseBackend", "ExpiringLeaseBackend", "FollowUp", "FollowUpBackend",
           "HeldBack", "HoldingBackend", "LeaseBackend"]
