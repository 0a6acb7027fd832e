"""``Want``: one pending job as a policy wants it tried.

Its own file because both the snapshot (a backend's submit order) and the plan (a policy's order)
hold it: in ``plan.py`` it made plan <-> snapshot a circle of imports (issue 34).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Want"]


class Want(NamedTuple):
    """One pending job as the policy wants it tried.

    A named tuple: every plan builds one per waiting job every cycle, and a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``. As immutable; ``_replace``
    stands for ``dataclasses.replace``."""

    job_id: str
    replicas: int  # DP replicas to start with
    min_replicas: int  # smallest start the policy accepts (== replicas: all or nothing)
    level: float = 0.0  # preemption level inside the class; lower = more important
    pools: tuple[tuple[str, str], ...] = ()  # (GPU type, tier) pools to try, best first; a gang
    # never spans pools. () = type-blind: the cycle tries the pool with the most free GPUs first

    def needed(self, replica_gpus: int) -> int:
        """GPUs the job needs to start as wanted: its minimum size (what its wait records)."""
        return self.min_replicas * replica_gpus
