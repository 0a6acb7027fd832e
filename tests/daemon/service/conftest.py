"""Shared pieces for the daemon service tests: a migrated SQLite database and a small simulated
cluster (the daemon's own ``sim`` backend) with a fixed job mix."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine

from railgang.daemon.backend import ActionResult, Backend
from railgang.daemon.clock import SimClock
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies import registry
from railgang.daemon.service.cycle import DaemonService
from railgang.daemon.sim.live import LiveSim
from railgang.daemon.sim.traces.model import TraceJob
from railgang.db import migrate
from railgang.db.session import make_engine
from railgang.topology.fabric import fabric_from_shape


class Crash(RuntimeError):
    """Stands for the daemon process dying (kill -9) at a chosen point of a cycle."""


class Recording:
    """Passes everything through and remembers every action the cluster accepted."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.accepted: list[Action] = []

    def snapshot(self, now: float) -> Snapshot:
        return self.inner.snapshot(now)

    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        results = self.inner.apply(list(actions), now)
        self.accepted += [r.action for r in results if r.ok]
        return results


class Crashing(Recording):
    """Dies inside ``apply``: before sending anything, after sending the first ``sent`` actions,
    or after Slurm accepted the whole batch but before the daemon heard back."""

    def __init__(self, inner: Backend, sent: int | None) -> None:
        super().__init__(inner)
        self.sent = sent  # None: the whole batch

    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        batch = list(actions) if self.sent is None else list(actions)[: self.sent]
        if batch:
            super().apply(batch, now)
        raise Crash(f"killed after sending {len(batch)} of {len(actions)} actions")


JOBS = [
    TraceJob("a", 0.0, 8, 3600.0, tp=8),
    TraceJob("b", 0.0, 16, 3600.0, tp=8),
    TraceJob("c", 0.0, 4, 3600.0, tp=4),
    TraceJob("d", 0.0, 2, 3600.0, tp=2),
    TraceJob("zbig", 0.0, 64, 3600.0, tp=8),  # larger than what is left: waits
]


def _to_base(url: str) -> None:
    if migrate.current(url) is not None:
        command.downgrade(migrate.alembic_config(url), "base")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A migrated database: a SQLite file, and (marked postgres) the session's PostgreSQL,
    emptied before and after (every migration's downgrade)."""
    pg = request.param == "postgres"
    url = request.getfixturevalue("postgres_url") if pg else f"sqlite:///{tmp_path / 'd.sqlite'}"
    if pg:
        _to_base(url)
    migrate.upgrade(url)
    eng = make_engine(url)
    yield eng
    eng.dispose()
    if pg:
        _to_base(url)


def cluster(jobs: Sequence[TraceJob] = JOBS) -> LiveSim:
    """4 leaves of 2 nodes × 8 GPUs (64 GPUs); every job arrives at t = 0."""
    return LiveSim(fabric_from_shape(8, 8, 2), list(jobs), start=0.0)


def service(engine: Engine, backend: Backend, clock: SimClock, **kw: Any) -> DaemonService:
    kw.setdefault("config", CycleConfig())
    return DaemonService(engine=engine, backend=backend, policy=registry.get("fifo"),
                         clock=clock, leader="test:1", **kw)
