"""A simulated week, once per session: a seeded trace replayed through the real core on a
32-GPU cluster, its segments and per-GPU telemetry written into a migrated SQLite ledger."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import EngineConfig, RunResult
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.telemetry import (
    LedgerStats,
    SimSegment,
    TelemetryConfig,
    simulate_with_ledger,
    write_ledger,
)
from railgang.daemon.sim.traces.model import TraceJob
from railgang.db import migrate
from railgang.db.session import make_engine
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.api.conftest import db_kind, engine  # noqa: F401 (fixtures: SQLite + PostgreSQL)

WEEK_START = "2026-11-23"  # a Monday; TelemetryConfig's default start
TEAMS = ("vision", "nlp", "speech")


def artifact_dir() -> Path:
    """Where tests keep what a person may want to look at (screenshots, reports)."""
    root = Path(os.environ.get("RAILGANG_TEST_ROOT", "/tmp/railgang-test"))
    path = root / "report-artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


def week_trace(seed: int = 7, jobs: int = 220) -> list[TraceJob]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(jobs):
        t += rng.expovariate(1 / (7 * 86400 / jobs))
        gpus = rng.choice([1, 1, 2, 4, 8, 8, 16])
        elastic = gpus >= 8 and rng.random() < 0.3
        out.append(TraceJob(f"w{i:03d}", t, gpus, rng.uniform(600, 6 * 3600),
                            account=rng.choice(TEAMS), priority_class=rng.choice([1, 2, 3, 3]),
                            elastic_min=1 if elastic else None,
                            elastic_max=gpus if elastic else None))
    return out


@dataclass
class SimWeek:
    url: str
    jobs: list[TraceJob]
    result: RunResult
    segments: list[SimSegment]
    stats: LedgerStats
    config: TelemetryConfig


@pytest.fixture(scope="session")
def sim_week(tmp_path_factory: pytest.TempPathFactory) -> SimWeek:
    url = f"sqlite:///{tmp_path_factory.mktemp('simweek') / 'ledger.sqlite'}"
    migrate.upgrade(url)
    jobs = week_trace()
    fabric = fabric_from_shape(4, 8, 2)
    result, segments, tiers = simulate_with_ledger(jobs, get("default"), fabric,
                                                   config=EngineConfig(),
                                                   comm=TopologyComm(fabric))
    cfg = TelemetryConfig()
    eng = make_engine(url)
    try:
        stats = write_ledger(eng, jobs, result, segments, fabric, cfg, node_tier=tiers)
    finally:
        eng.dispose()
    return SimWeek(url, jobs, result, segments, stats, cfg)
