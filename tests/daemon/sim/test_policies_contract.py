"""Every registered policy, replayed on seeded random traces: the simulator's invariants hold."""

from __future__ import annotations

import random
from typing import Any

import pytest

from railgang.daemon.core.policies.registry import get, names
from railgang.daemon.sim.engine import simulate
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape


def random_trace(seed: int, n: int = 30) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / 600)
        gpus = rng.choice([1, 1, 1, 2, 4, 8, 8, 16])
        elastic = gpus > 1 and rng.random() < 0.3
        jobs.append(TraceJob(
            job_id=f"j{i}", submit_time=t, gpus=gpus, duration_s=rng.uniform(60, 20_000),
            account=rng.choice(["red", "blue", "green"]),
            elastic_min=1 if elastic else None, elastic_max=gpus if elastic else None))
    return jobs


@pytest.mark.parametrize("policy", names())
@pytest.mark.parametrize("seed", [1, 2])
def test_invariants(policy: str, seed: int) -> None:
    fabric: Any = fabric_from_shape(4, 8, 2)
    jobs = random_trace(seed)
    result = simulate(jobs, get(policy), fabric, comm=TopologyComm(fabric))
    m = result.metrics
    assert m.finished == len(jobs) and m.rejected == 0 and m.unfinished == 0
    assert not result.failed_actions, result.failed_actions
    assert 0 < m.util_productive <= m.util_allocated <= 1.0 + 1e-9
    for rec in result.records:
        assert rec.start is not None and rec.finish is not None
        assert rec.submit <= rec.start < rec.finish
        assert rec.lost_gpu_s >= 0 and rec.productive_gpu_s <= rec.allocated_gpu_s + 1e-6
        if rec.preemptions == 0 and rec.resizes == 0:
            assert rec.finish - rec.start >= rec.duration_s * (1 - 1e-9)
