"""``benchmarks.sim.cycle_cost --phases``: the per-step CPU figures BENCHMARKS.md quotes leave
the schedule as it is and add up inside the replay's CPU time."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.common import REPO

ARGS = ["--policy", "default", "--trace", "gangs", "--jobs", "2000", "--gpus", "128"]


def replay(*extra: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.sim.cycle_cost", *ARGS, *extra],
                         cwd=REPO, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_phases_leave_the_schedule_and_add_up_inside_the_replay() -> None:
    plain, timed = replay(), replay("--phases")
    assert timed["schedule"] == plain["schedule"] and timed["cycles"] == plain["cycles"]
    steps = [timed[f"{k}_cpu_s"] for k in ("plan", "place", "preempt")]
    assert all(isinstance(v, float) and v >= 0 for v in steps)
    # (rounded to 0.1 s each: the three steps sit inside decide, decide inside the replay)
    assert sum(steps) <= timed["decide_cpu_s"] + 0.3  # type: ignore[operator]
    assert 0 < timed["decide_cpu_s"] <= timed["cpu_s"] + 0.1  # type: ignore[operator]
    assert "plan_cpu_s" not in plain
