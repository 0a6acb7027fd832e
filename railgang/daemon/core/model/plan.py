"""The policy seam: a one-method Protocol and the plan it returns (STYLE 4).

A policy orders the pending queue and sizes jobs; it never places, preempts or emits actions —
the cycle (``railgang.daemon.core.cycle``) does that the same way for every policy.

``plan(snapshot, now) -> Plan``:

- ``Plan.order``: pending jobs in the order to try, each a :class:`Want` (start size, smallest
  acceptable start size, and a preemption *level*: lower = more important). The cycle keeps the
  policy's order inside each priority class and puts classes first (0 before 3), so a policy
  cannot break DESIGN R-S7.
- ``Plan.targets``: desired DP replicas for running elastic jobs (the cycle applies them with
  hysteresis: minimum gain, minimum interval, amortised transition cost); a job not in
  ``targets`` wants its maximum. ``Plan.sized`` says the targets already weigh the waiting jobs.
- ``Plan.mode``: ``strict`` (stop at the first job that cannot start: FIFO), ``backfill`` (EASY:
  later jobs start only if they do not delay the head job's reserved start), ``greedy`` (skip).
  ``Plan.reserve_for`` narrows who may hold the backfill reservation (e.g. only starving jobs).
- ``Plan.levels`` + ``preempt_within_class``: lets a policy (Tiresias) evict running work of the
  same class whose level is strictly worse than the waiting job's, under the same budgets.

The registry (``railgang.daemon.core.policies.registry``) discovers every policy module; adding a
policy is adding one file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol, runtime_checkable

from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.model.want import Want

Mode = Literal["strict", "backfill", "greedy"]


@dataclass(frozen=True)
class Plan:
    order: tuple[Want, ...]  # waiting jobs of the snapshot, each once, in the order to try them
    # (running jobs are sized by ``targets``)
    mode: Mode = "greedy"
    targets: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    levels: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    preempt_within_class: bool = False
    reserve_for: frozenset[str] | None = None  # backfill: who may hold the reservation (None: the
    # first job that cannot start; a set: only those, e.g. starving jobs — others are skipped)
    hetero: bool = False  # the plan placed by GPU type (``hetero.aware``): the cycle may also
    # move running jobs onto faster types left idle (``hetero.upgrade_phase``); False = type-blind
    sized: bool = False  # targets already weigh the waiting jobs (Pollux): growth may proceed
    # while same-class work waits; otherwise growth only uses GPUs nobody of that class waits for


@runtime_checkable
class Policy(Protocol):
    """Orders and sizes; one method. ``name`` is the registry key."""

    name: str

    def plan(self, snapshot: Snapshot, now: float) -> Plan: ...


def want(job_id: str, replicas: int, min_replicas: int | None = None, level: float = 0.0,
         pools: tuple[tuple[str, str], ...] = ()) -> Want:
    return Want(job_id, replicas, replicas if min_replicas is None else min_replicas, level, pools)


def submit_order(snapshot: Snapshot) -> tuple[Want, ...]:
    """FIFO's order of the snapshot's queue (``queue_order.rigid_by_submit``), kept by its index."""
    return snapshot.index.submit_order


def regrow_targets(snapshot: Snapshot) -> dict[str, int]:
    """Targets of a rigid-minded policy: an elastic job shrunk below its requested size (to make
    room for a higher class) grows back to it, never beyond."""
    return {r.job_id: max(r.replicas, r.job.replicas) for r in snapshot.elastic_running}


__all__ = ["Mode", "Plan", "Policy", "Want", "regrow_targets", "submit_order", "want"]
