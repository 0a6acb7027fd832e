"""One replay's CPU cost and schedule, from any source tree: the before/after tool of issue 24 item 2.

    .venv/bin/python -m benchmarks.sim.cycle_cost --policy fifo --trace philly [--limit N]
        [--tree DIR] [--cpu-limit S]
    .venv/bin/python -m benchmarks.sim.cycle_cost --policy default --trace gangs --jobs 100000
        [--gpus 1024] [--load 0.8] [--seed 0]

``--trace philly`` replays the Philly-derived trace (all VCs, ``$RAILGANG_PHILLY_DIR`` or
../shared/traces/philly-gavel) on 64 x 8 GPUs (leaves of 8), as ``sim_policies.py`` does; any
other value is a shape of ``synthetic_trace.py`` (``philly``-shaped synthetic is
``--trace synthetic``), generated here, on ``--gpus`` GPUs in nodes of 8, leaves of 8.

``--limit N`` keeps the first N jobs of either trace (of a shape: of its ``--jobs``, so the
first 15,000 of the 100,000-job ``gangs`` replay the load of that trace's start).

``--tree DIR`` imports ``railgang`` from another checkout (a ``git worktree`` of the baseline),
so both sides run the same script on the same trace. ``--cpu-limit S`` stops a replay after S
CPU seconds (SIGPROF) and says how far it got (``jobs_done``, ``simulated_h``). ``--calls`` also counts the Python function calls
of the replay (``cProfile``: a measure the machine's load does not move; CPU s is then inflated);
``--phases`` adds the CPU s spent in the policy's plan, the place and preempt phases and the
whole ``decide`` (``plan_cpu_s`` ...). Prints one JSON line: CPU and wall seconds,
cycles, mean JCT, load average, the waiting queue's length after each cycle (mean, p50, p99,
max), and ``schedule``, a SHA-256 of every job's (id, start, finish,
preemptions, resizes, idle GPU-s charged per pending reason) in submit order, which must be equal before and after a speed-up.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import json
import os
import pstats
import signal
import time
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, import_first


class _OutOfCpu(Exception):
    pass


def _on_prof(signum: int, frame: Any) -> None:
    raise _OutOfCpu


def _jobs(args: argparse.Namespace) -> tuple[list[Any], Any]:
    from railgang.topology.fabric import fabric_from_shape

    if args.trace == "philly":
        from railgang.daemon.sim.traces.philly import default_dir, read_philly

        jobs = list(read_philly(default_dir()).jobs)
        return jobs[: args.limit] if args.limit else jobs, fabric_from_shape(64, 8, 8)
    from benchmarks.sim.synthetic_trace import generate, write_csv
    from railgang.daemon.sim.traces.csv_trace import read_csv

    path = Path(f"/tmp/cycle_cost-{os.getpid()}.csv")
    shape = "philly" if args.trace == "synthetic" else args.trace
    try:
        write_csv(generate(args.jobs, gpus_total=args.gpus, load=args.load, seed=args.seed,
                           shape=shape), path)
        jobs = list(read_csv(path).jobs)[: args.limit or None]
    finally:
        path.unlink(missing_ok=True)
    return jobs, fabric_from_shape(args.gpus // 8, 8, 8)


class Depth:
    """The waiting queue's length after each cycle (read only: the schedule is unchanged), so a
    replay's cost can be set beside how long its queue was."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self.last = 0.0

    def __call__(self, now: float, backend: Any) -> None:
        self.last = now
        self.samples.append(len(backend.pending))

    def summary(self) -> dict[str, Any]:
        s = sorted(self.samples)
        if not s:
            return {}
        return {"waiting_mean": round(sum(s) / len(s), 1), "waiting_p50": s[len(s) // 2],
                "waiting_p99": s[int(len(s) * 0.99)], "waiting_max": s[-1]}


class Phases:
    """CPU seconds inside each step of the core, summed over a replay (``--phases``): the
    policy's order (``plan``), the place phase, the preempt phase, the whole ``decide``; the
    rest is the adapters (the simulator's events and snapshots, the cycle's bookkeeping).
    Two clock reads a step: the schedule is unchanged and the replay barely slower."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        inner, cpu, clock = getattr(owner, attr), self.cpu, time.process_time
        cpu[name] = 0.0

        def timed(*a: Any, **k: Any) -> Any:
            t = clock()
            try:
                return inner(*a, **k)
            finally:
                cpu[name] += clock() - t

        setattr(owner, attr, timed)

    def summary(self) -> dict[str, float]:
        return {f"{k}_cpu_s": round(v, 1) for k, v in self.cpu.items()}


def schedule_hash(records: list[Any]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(repr((r.job_id, r.start, r.finish, r.preemptions, r.resizes,
                       sorted(r.idle_fit_gpu_s.items()))).encode())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="default")
    ap.add_argument("--trace", default="philly")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--load", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tree", type=Path, default=REPO)
    ap.add_argument("--cpu-limit", type=float, default=0.0)
    ap.add_argument("--calls", action="store_true", help="count Python function calls (cProfile)")
    ap.add_argument("--phases", action="store_true",
                    help="CPU s inside the policy's plan, the place and preempt phases, decide")
    ap.add_argument("--cycle-s", type=float, default=0.0,
                    help="decision quantum (0: a cycle at every instant something changed)")
    ap.add_argument("--tick-s", type=float, default=0.0, help="periodic cycles while jobs wait (0: off)")
    args = ap.parse_args()
    from benchmarks.sim.synthetic_trace import SHAPES

    traces = sorted({"philly", "synthetic", *SHAPES})
    if args.trace not in traces:  # one line, not a traceback
        ap.error(f"--trace {args.trace!r}: one of {', '.join(traces)}")
    if args.limit is not None and args.limit < 0:
        ap.error("--limit: the number of jobs to keep, 0 or more (0: all)")
    if not (0 <= args.cycle_s <= 86400 and 0 <= args.tick_s <= 86400):
        ap.error("--cycle-s and --tick-s: seconds, 0 to 86400")
    if args.trace != "philly" and not (args.jobs >= 1 and args.gpus >= 8 and 0 < args.load <= 10):
        ap.error("a synthetic trace needs --jobs >= 1, --gpus >= 8 and 0 < --load <= 10")
    import_first(args.tree)
    import railgang.daemon.core.cycle as cycle
    from railgang.daemon.core.policies.registry import get
    from railgang.daemon.sim.engine import EngineConfig, simulate
    from railgang.daemon.sim.progress import TopologyComm

    policy = get(args.policy)
    phases = Phases() if args.phases else None
    if phases is not None:
        import railgang.daemon.loop as loop
        from railgang.daemon.core.phases.evict import EvictPhase
        from railgang.daemon.core.phases.place import PlacePhase

        phases.wrap(type(policy), "plan", "plan")
        phases.wrap(PlacePhase, "run", "place")
        phases.wrap(EvictPhase, "run", "preempt")
        phases.wrap(loop, "decide", "decide")
    jobs, fabric = _jobs(args)
    load0 = os.getloadavg()
    out: dict[str, Any] = {"tree": str(Path(cycle.__file__).parents[3]), "policy": args.policy, "trace": args.trace,
                           "jobs": len(jobs), "load_before": round(load0[0], 2)}
    if args.cycle_s or args.tick_s:  # only when given: earlier JSON lines stay comparable
        out.update(cycle_s=args.cycle_s, tick_s=args.tick_s)
    if args.cpu_limit > 0:
        signal.signal(signal.SIGPROF, _on_prof)
        signal.setitimer(signal.ITIMER_PROF, args.cpu_limit)
    prof = cProfile.Profile(time.process_time) if args.calls else None
    done = [0]  # jobs finished so far: how far a replay stopped by --cpu-limit got
    depth = Depth()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        if prof is not None:
            prof.enable()
        run = simulate(jobs, policy, fabric, comm=TopologyComm(fabric),
                       config=EngineConfig(cycle_s=args.cycle_s, tick_s=args.tick_s), on_progress=lambda k, _n: done.__setitem__(0, k),
                       observer=depth)
        if prof is not None:
            prof.disable()
            out["calls"] = pstats.Stats(prof).total_calls  # type: ignore[attr-defined]
    except _OutOfCpu:
        out.update(finished=False, cpu_s=round(time.process_time() - cpu, 1), jobs_done=done[0],
                   simulated_h=round((depth.last - jobs[0].submit_time) / 3600, 1) if jobs else 0.0)
    else:
        signal.setitimer(signal.ITIMER_PROF, 0)
        out.update(finished=True, cpu_s=round(time.process_time() - cpu, 1),
                   wall_s=round(time.perf_counter() - wall, 1), cycles=run.cycles,
                   skipped=run.skipped, mean_jct_h=round(run.metrics.mean_jct_s / 3600, 3),
                   schedule=schedule_hash(run.records))
    out.update(depth.summary())
    if phases is not None:
        out.update(phases.summary())
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
