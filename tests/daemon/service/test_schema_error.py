"""Slurm JSON of a schema railgang does not read fails the cycle loudly (issue 17): the error is
recorded on the cycle (``railgang daemon status`` shows it), counted in
``railgang_slurm_schema_errors_total``, and no heartbeat is written (job_submit.lua stops leasing:
Slurm schedules on its own)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy import Engine

from railgang.daemon.backend import ActionResult
from railgang.daemon.clock import SimClock
from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.service.metrics import DaemonMetrics
from railgang.db.repositories import journal as repo
from railgang.db.session import session_scope
from railgang.errors import SlurmSchemaError
from tests.daemon.service.conftest import service

MESSAGE = ("cannot read the cluster: squeue --json: unknown output schema "
           "'data_parser/v0.0.46' (Slurm 27.05.0)")


class UnknownSchema:
    def snapshot(self, now: float) -> Snapshot:
        raise SlurmSchemaError("squeue", MESSAGE)

    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        raise AssertionError("nothing may be applied on an unread cluster")


def test_an_unknown_schema_fails_the_cycle_loudly(engine: Engine, tmp_path: Path) -> None:
    metrics = DaemonMetrics()
    beat = tmp_path / "heartbeat"
    svc = service(engine, UnknownSchema(), SimClock(1000.0), metrics=metrics, heartbeat_file=beat)
    with pytest.raises(SlurmSchemaError, match="unknown output schema"):
        svc.run_once()
    assert metrics.registry.get_sample_value("railgang_slurm_schema_errors_total",
                                             {"command": "squeue"}) == 1
    assert metrics.registry.get_sample_value("railgang_slurm_schema_errors_total",
                                             {"command": "sinfo"}) == 0
    assert metrics.registry.get_sample_value("railgang_cycles_total", {"result": "error"}) == 1
    with session_scope(engine) as s:
        last = repo.last_cycle(s)
    assert last is not None and "SlurmSchemaError" in (last.error or "")
    assert "data_parser/v0.0.46" in (last.error or "")
    assert not beat.exists()
