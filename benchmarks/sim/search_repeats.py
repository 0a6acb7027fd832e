"""What parking could save: the share of a replay's searches that repeat a miss of the cycle before.

Issue 37 item 1 asks that jobs that cannot start be parked until what they wait for changes. This
runs one ``cycle_cost`` replay (same arguments) with the place phase's turns
(``PlacePhase._turn``) and the preempt phase's victim searches (``EvictPhase._solve``) timed, and
prints, per phase, the CPU seconds of the turns that missed again for a job that missed in the
cycle before, under two tests of "nothing it waits for changed":

- ``exact``: the same running jobs and the same free GPUs on every node (what a parked job could
  skip without changing the schedule, ignoring the time-dependent rules);
- ``loose``: no more free GPUs in all than the cycle before (Kueue's "until GPUs are freed"; not
  exact under backfill: a reservation's shadow moves with the running jobs' ends).

Either is an upper bound of what parking could save (a parked job still costs its lookup).

    .venv/bin/python -m benchmarks.sim.search_repeats --policy default --trace philly --limit 0
    .venv/bin/python -m benchmarks.sim.search_repeats --policy default --trace gangs --jobs 100000 \\
        --load 0.8 --seed 0 --cpu-limit 90
"""

from __future__ import annotations

import itertools
import runpy
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# (cycle time, job id, running jobs' hash, free GPUs' hash, free GPU count, missed, CPU s)
Turn = tuple[float, str, int, int, int, bool, float]


def _timed(turns: list[Turn], missed: Callable[[Any, Any, Any], bool]) -> Callable[..., Any]:
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(self: Any, job: Any, *args: Any) -> Any:
            d = self.d
            running = hash(frozenset(d.snap.running))
            free = hash(tuple(sorted((n, len(g)) for n, g in d.free.items())))
            count = d.free_count
            t = time.process_time()
            out = fn(self, job, *args)
            dt = time.process_time() - t
            turns.append((d.now, job.job_id, running, free, count, missed(self, job, out), dt))
            return out
        return timed
    return wrap


def _repeats(turns: list[Turn]) -> dict[str, float]:
    by_cycle: dict[float, dict[str, Turn]] = defaultdict(dict)
    for t in turns:
        by_cycle[t[0]][t[1]] = t
    cycles = sorted(by_cycle)
    exact = loose = 0.0
    for before, now in itertools.pairwise(cycles):
        for job_id, t in by_cycle[now].items():
            p = by_cycle[before].get(job_id)
            if not t[5] or p is None or not p[5]:
                continue
            exact += t[6] if (p[2], p[3]) == (t[2], t[3]) else 0.0
            loose += t[6] if t[4] <= p[4] else 0.0
    return {"turns": len(turns), "cpu_s": round(sum(t[6] for t in turns), 2),
            "missed": sum(t[5] for t in turns), "missed_cpu_s": round(sum(t[6] for t in turns if t[5]), 2),
            "exact_repeat_cpu_s": round(exact, 2), "loose_repeat_cpu_s": round(loose, 2)}


def main() -> None:
    if any(a == "--tree" or a.startswith("--tree=") for a in sys.argv[1:]):
        # the timing wraps this checkout's phases; another tree's would run untimed (0 turns)
        sys.exit("search_repeats: --tree is not supported; run it from the checkout to measure")
    from railgang.daemon.core.phases import evict, place

    turns: dict[str, list[Turn]] = {"place": [], "preempt": []}
    place.PlacePhase._turn = _timed(  # type: ignore[method-assign]
        turns["place"], lambda self, job, _: self.d.waits_for(job.job_id) is not None)(place.PlacePhase._turn)
    evict.EvictPhase._solve = _timed(  # type: ignore[method-assign]
        turns["preempt"], lambda self, job, found: found.placed is None)(evict.EvictPhase._solve)
    t0 = time.process_time()
    sys.argv = ["cycle_cost", *sys.argv[1:]]
    try:
        runpy.run_module("benchmarks.sim.cycle_cost", run_name="__main__")
    finally:
        import json

        print(json.dumps({"replay_cpu_s": round(time.process_time() - t0, 1),
                          **{k: _repeats(v) for k, v in turns.items()}}))


if __name__ == "__main__":
    main()
