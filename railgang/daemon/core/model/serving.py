"""Serving pools as one cycle sees them: which nodes serve, which are lent (issue 19, item 3).

A serving deployment owns a *pool* of whole nodes. The serving controller
(``railgang.daemon.serving.controller``) decides each cycle how many of them its replicas need
over the next switch-in time; the rest are *lent*. The core reads that decision as a
:class:`ServingPool` on the snapshot (``Snapshot.serving``; None everywhere else, so schedules
without serving are exactly as before) and applies these rules to where a job may run:

1. A **replica** (a class-0 job whose request names its deployment, ``JobRequest.serving``) runs
   only on its deployment's *held* nodes (the pool less the lent ones). Borrowers still running
   there are the take-back: the preempt phase frees them for the replica, shrinking elastic
   borrowers before it preempts rigid ones (``phases/evict.py``).
2. **Lent** nodes are borrowable by preemptible work only (class 3). Elastic jobs first: they
   shrink instead of dying, so they may borrow any lent node; a rigid job only a lent node it
   would leave before the take-back the forecast expects (its time limit ends by then), or one
   no take-back is expected for within the forecast (``lend_rigid`` lends it any lent node).
3. Every other job runs off the serving pools.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from railgang.daemon.core.model.job import Job, PriorityClass


@dataclass(frozen=True, slots=True)
class ServingPool:
    """The serving pools' nodes and the ones lent to preemptible work this cycle."""

    pool: Mapping[str, str]  # node -> the deployment whose pool it is
    lent: Mapping[str, float | None] = field(  # lent node -> when the plan expects it back
        default_factory=lambda: MappingProxyType({}))  # (None: not within the forecast)
    lend_rigid: bool = False  # rigid class-3 jobs may borrow any lent node too (checkpointed
    # and requeued at the take-back); False: only one their time limit ends before

    def __post_init__(self) -> None:
        stray = sorted(n for n in self.lent if n not in self.pool)
        if stray:
            raise ValueError(f"lent nodes outside every serving pool: {', '.join(stray[:5])}")

    def held(self, deployment: str) -> frozenset[str]:
        """The pool nodes of ``deployment`` that are not lent (where its replicas run)."""
        return frozenset(n for n, d in self.pool.items() if d == deployment and n not in self.lent)

    def borrowable(self, job: Job, now: float) -> frozenset[str]:
        """The lent nodes ``job`` may borrow (rule 2 of the module docstring)."""
        if job.priority_class != PriorityClass.BATCH or job.request.serving:
            return frozenset()
        if job.request.elastic or self.lend_rigid:
            return frozenset(self.lent)
        limit = job.request.time_limit_s
        return frozenset(n for n, back in self.lent.items()
                         if back is None or (limit is not None and now + limit <= back))

    def allowed(self, job: Job, nodes: frozenset[str], now: float) -> frozenset[str]:
        """Of ``nodes``, the ones ``job`` may run on (the module docstring's rules)."""
        if job.request.serving:
            return nodes & self.held(job.request.serving)
        return frozenset(n for n in nodes if n not in self.pool) | (nodes & self.borrowable(job, now))

    def lent_to(self, assignment: Mapping[str, object]) -> dict[str, float | None]:
        """The lent nodes among ``assignment``'s, with their expected take-back times."""
        return {n: self.lent[n] for n in sorted(assignment) if n in self.lent}


__all__ = ["ServingPool"]
