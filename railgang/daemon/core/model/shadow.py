"""The EASY shadow: when ``need`` GPUs are free, counting the GPUs what runs gives back at its
expected end (count-based, as Slurm's and EASY's backfill reservation: where they are is
checked when the job actually starts).

Every reader of it asks the same question of its own holders: the backfill head's start and
whether starting small pays (``Draft.shadow``; on the head's nodes only, ``place._shadow_on``),
how long a gang waits for a GPU pool (``pool_place``, ``pools.aware``), for one leaf
(``LeafWait.room_at``, ``defrag``), and the policies' waits (``elastic.wait_for``). So the
holders are one :class:`Ends` and the answer one :meth:`Ends.when`: the first end by which the
GPUs given back reach the need. Ends are sorted by (end, GPUs), so of holders ending together
the one freeing fewer GPUs counts first, which fixes the GPUs spare at that time.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

INF = float("inf")


@dataclass(frozen=True, slots=True)
class Ends:
    """What holds GPUs, soonest expected end first: the end times and the GPUs given back by each
    of them (cumulative)."""

    times: tuple[float, ...]
    freed: tuple[int, ...]

    @classmethod
    def of(cls, holders: Iterable[tuple[float, int]]) -> Ends:
        """The ends of ``holders``, each (expected end, GPUs it gives back), in any order."""
        pairs = sorted(holders)
        return cls(tuple(t for t, _ in pairs), tuple(itertools.accumulate(g for _, g in pairs)))

    def when(self, free: int, need: int, now: float) -> tuple[float, int]:
        """When ``need`` GPUs are free, from ``free`` free at ``now``, and how many more than
        ``need`` are free then; (inf, 0) when they never are."""
        if free >= need:
            return now, free - need
        i = bisect.bisect_left(self.freed, need - free)
        if i == len(self.times):
            return INF, 0
        return self.times[i], free + self.freed[i] - need


NO_ENDS = Ends((), ())

__all__ = ["INF", "NO_ENDS", "Ends"]
