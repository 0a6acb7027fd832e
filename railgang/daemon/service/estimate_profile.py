"""Start estimates past the simulation's budget: a GPU-count profile (issue 24 item 3).

The estimate's forward simulation (``estimate.py``) runs the real decision core cycle by cycle,
which is exact but costs a full cycle per simulated decision: at 1,000 waiting jobs its one-second
budget reaches the first few dozen. The jobs it did not reach are placed here instead, the way
Slurm's backfill plans its reservations: on a profile of free GPUs over time (what runs now and
what the simulation started, each until its estimated end), each job in queue order gets the
earliest time from where the simulation stopped at which its GPUs are free for its whole run
time, and holds them from then on. Later jobs may fill earlier holes (that never delays a job
ahead, whose GPUs are already held).

What it ignores, and so what an estimate from it means: topology (a gang needs its GPUs in one
leaf or block; the profile counts GPUs, so it is optimistic where fragmentation bites), the
policy's own order past the simulation (queue order), preemption and resizes. Every estimate
from it says so (``note``). Cost: O(jobs x breakpoints) numpy slices, milliseconds at 1,000 jobs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["profile_starts"]


def profile_starts(capacity: int, held: Iterable[tuple[float, float, int]],
                   queue: Sequence[tuple[str, int, float]], after: float,
                   horizon: float) -> dict[str, float | None]:
    """Earliest start (seconds from now) of each ``queue`` job ``(id, gpus, run_s)`` in order,
    none before ``after``; None when it cannot start by ``horizon`` (or needs more than
    ``capacity``). ``held``: ``(start_s, end_s, gpus)`` of GPUs already taken."""
    # breakpoints (times[:n]) and the free GPUs from each to the next, in buffers that grow by
    # doubling: np.insert would copy both arrays twice per job
    size = 2 * (len(queue) + 8)
    times = np.empty(size)
    free = np.empty(size)
    times[0], free[0], n = 0.0, float(capacity), 1

    def cut(x: float) -> int:
        """Index of the breakpoint at ``x`` (made if needed)."""
        nonlocal times, free, n
        k = int(np.searchsorted(times[:n], x))
        if k < n and times[k] == x:
            return k
        if n == len(times):
            times = np.concatenate([times, np.empty(n)])
            free = np.concatenate([free, np.empty(n)])
        times[k + 1:n + 1] = times[k:n]
        free[k + 1:n + 1] = free[k:n]
        times[k] = x
        free[k] = free[k - 1] if k > 0 else float(capacity)
        n += 1
        return k

    def take(start: float, end: float, gpus: int) -> None:
        if end <= start or gpus <= 0:
            return
        a = cut(start)
        b = cut(end)
        free[a:b] -= gpus

    cut(max(0.0, after))
    for start, end, gpus in held:
        take(max(0.0, start), end, gpus)
    out: dict[str, float | None] = {}
    for job_id, gpus, run_s in queue:
        if gpus > capacity or not math.isfinite(run_s):
            out[job_id] = None
            continue
        run_s = max(run_s, 1.0)
        i = int(np.searchsorted(times[:n], after, side="right")) - 1
        found: float | None = None
        while i < n:
            t = max(float(times[i]), after)
            if t > horizon:
                break
            j = int(np.searchsorted(times[:n], t + run_s, side="left"))
            bad = (free[i:max(j, i + 1)] < gpus).nonzero()[0]
            if not len(bad):
                found = t
                break
            i += int(bad[-1]) + 1  # past the last breakpoint short of room
        out[job_id] = found
        if found is not None:
            take(found, found + run_s, gpus)
    return out
