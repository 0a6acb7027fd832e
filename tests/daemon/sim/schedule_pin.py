"""What a replay decided, job by job, in a form a file can pin (``test_schedules_pinned.py``).

A refactoring of the core or the simulator must not change a single schedule. The pinned files in
``data/`` were written by the code *before* such a change; the test replays the same inputs with
the code of today and compares exactly (floats included). Regenerate only when a schedule change
is intended and documented::

    .venv/bin/python -m tests.daemon.sim.schedule_pin              # synthetic -> data/schedules.json
    .venv/bin/python -m tests.daemon.sim.schedule_pin --philly     # -> data/philly_schedules.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path
from typing import Any

from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import RunResult, simulate
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.replay import make_elastic
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

DATA = Path(__file__).parent / "data"
POLICIES = ("fifo", "slurm", "tiresias", "themis", "pollux", "default")
PHILLY_JOBS = 300  # the first jobs of the merged Philly trace, on PHILLY_NODES x 8 GPUs
PHILLY_NODES = 8


def synthetic_jobs(n: int = 60, seed: int = 12) -> list[TraceJob]:
    """A busy mix on 32 GPUs: sizes 1-32, TP groups, elastic ranges, all four priority classes
    (so preemption, shrink, grow and backfill all happen)."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / 400.0)
        tp = rng.choice((1, 1, 2, 4))
        dp = rng.choice((1, 1, 2, 2, 4, 8)) if tp * 8 <= 32 else 1
        elastic = dp > 1 and rng.random() < 0.35
        jobs.append(TraceJob(
            job_id=f"s{i:03d}", submit_time=round(t, 1), gpus=tp * dp,
            duration_s=round(rng.lognormvariate(7.5, 1.0), 1),
            account=rng.choice(("vision", "nlp", "rl")), tp=tp, dp=dp,
            elastic_min=1 if elastic else None, elastic_max=dp * 2 if elastic else None,
            priority_class=rng.choice((0, 1, 2, 3, 3, 3, 3))))
    return jobs


def outcome(run: RunResult, *, digest: bool) -> dict[str, Any]:
    """Metrics plus, per job, (id, first start, finish, preemptions, resizes, GPU-s lost); the
    per-job rows as a sha256 when ``digest`` (the Philly slice is too long to store)."""
    rows = [[r.job_id, r.start, r.finish, r.preemptions, r.resizes, r.lost_gpu_s]
            for r in run.records]
    metrics = run.metrics.to_dict()
    if digest:
        return {"metrics": metrics,
                "jobs_sha256": hashlib.sha256(json.dumps(rows).encode()).hexdigest()}
    return {"metrics": metrics, "jobs": rows}


def replay_all(jobs: list[TraceJob], nodes: int, leaf: int, *, digest: bool) -> dict[str, Any]:
    """Every policy, rigid and with ``--elastic``, on ``nodes`` x 8 GPUs."""
    fabric = fabric_from_shape(nodes, 8, leaf)
    out: dict[str, Any] = {}
    for variant, trace in (("rigid", jobs), ("elastic", make_elastic(jobs))):
        for policy in POLICIES:
            run = simulate(trace, get(policy), fabric, comm=TopologyComm(fabric))
            out[f"{policy}-{variant}"] = outcome(run, digest=digest)
    return out


def synthetic() -> dict[str, Any]:
    return replay_all(synthetic_jobs(), nodes=4, leaf=2, digest=False)


def philly(root: Path) -> dict[str, Any]:
    from railgang.daemon.sim.traces.philly import read_philly

    jobs = list(read_philly(root).jobs[:PHILLY_JOBS])
    return replay_all(jobs, nodes=PHILLY_NODES, leaf=8, digest=True)


def dump(data: dict[str, Any]) -> str:
    """One run per line: diffs of the pinned file stay readable."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in data.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--philly", action="store_true", help="pin the Philly slice instead")
    args = ap.parse_args()
    if args.philly:
        from railgang.daemon.sim.traces.philly import default_dir

        (DATA / "philly_schedules.json").write_text(dump(philly(default_dir())))
    else:
        (DATA / "schedules.json").write_text(dump(synthetic()))


if __name__ == "__main__":
    main()
