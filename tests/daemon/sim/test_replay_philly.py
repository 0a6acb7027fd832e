"""End-to-end replay of a slice of the Philly-derived trace through the real core and topology."""

from __future__ import annotations

from pathlib import Path

import pytest

from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import simulate
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.traces.philly import default_dir, read_philly
from railgang.topology.fabric import fabric_from_shape

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def philly_slice() -> list:  # type: ignore[type-arg]
    path: Path = default_dir()
    if not (path / "simulation_throughputs.json").is_file():
        pytest.fail(f"Philly-derived trace not found at {path}: check out ../shared or set "
                    "RAILGANG_PHILLY_DIR (this test must not be skipped)")
    return list(read_philly(path).jobs[:400])


@pytest.mark.parametrize("policy", ["fifo", "default"])
def test_replay_slice_accounts_for_every_job(philly_slice: list, policy: str) -> None:  # type: ignore[type-arg]
    fabric = fabric_from_shape(16, 8, 4)  # 128 GPUs: small enough to queue
    result = simulate(philly_slice, get(policy), fabric, comm=TopologyComm(fabric))
    m = result.metrics
    assert m.finished + m.rejected + m.unfinished == len(philly_slice)
    assert m.unfinished == 0 and not result.failed_actions
    assert 0 < m.util_productive <= m.util_allocated <= 1.0
    for rec in result.records:
        if rec.finish is not None and rec.preemptions == 0 and rec.resizes == 0:
            # a rigid, never-preempted job is never faster than its trace duration
            assert rec.finish - rec.start >= rec.duration_s * (1 - 1e-9)
    again = simulate(philly_slice, get(policy), fabric, comm=TopologyComm(fabric))
    assert [(r.start, r.finish) for r in again.records] == \
        [(r.start, r.finish) for r in result.records]
