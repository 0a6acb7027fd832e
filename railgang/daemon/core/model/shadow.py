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
from collections.abc import Iterable, Sequence

INF = float("inf")


class Ends:
    """What holds GPUs, soonest expected end first: (end, GPUs it gives back) pairs, sorted.
    The GPUs given back by each end (cumulative) are summed as far as a question has needed
    them, so a reader asking once walks only to its answer, and one asking for many jobs
    (a policy's waits) bisects what was summed."""

    __slots__ = ("_pairs", "freed", "times")

    def __init__(self, pairs: Sequence[tuple[float, int]]) -> None:
        self._pairs = pairs  # sorted by (end, GPUs); nothing changes it afterwards
        self.times: list[float] = []  # the ends summed so far
        self.freed: list[int] = []  # GPUs given back by each of them, cumulative

    @classmethod
    def of(cls, holders: Iterable[tuple[float, int]]) -> Ends:
        """The ends of ``holders``, each (expected end, GPUs it gives back), in any order."""
        return cls(sorted(holders))

    def when(self, free: int, need: int, now: float) -> tuple[float, int]:
        """When ``need`` GPUs are free, from ``free`` free at ``now``, and how many more than
        ``need`` are free then; (inf, 0) when they never are."""
        if free >= need:
            return now, free - need
        short, times, freed = need - free, self.times, self.freed
        if freed and freed[-1] >= short:
            i = bisect.bisect_left(freed, short)
            return times[i], free + freed[i] - need
        pairs, i, total = self._pairs, len(freed), freed[-1] if freed else 0
        while total < short:
            if i == len(pairs):
                return INF, 0
            t, g = pairs[i]
            total += g
            times.append(t)
            freed.append(total)
            i += 1
        return times[-1], free + total - need


NO_ENDS = Ends(())

__all__ = ["INF", "NO_ENDS", "Ends"]
