"""A backend that knows when its leases end gets only the due ones renewed by the cycle, and
the cycle reports (and counts in /metrics) those, not the whole queue (issue 17 item 4)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine

from railgang.daemon.backend import ExpiringLeaseBackend
from railgang.daemon.clock import SimClock
from tests.daemon.service.conftest import cluster, service
from tests.daemon.service.test_cycle import Leasing


class Expiring(Leasing):
    """Leases of "a" and "c" end soon; the others were renewed a moment ago."""

    def leases_due(self, job_ids: Sequence[str], now: float) -> list[str]:
        return [j for j in job_ids if j in ("a", "c")]


def test_only_due_leases_are_renewed_and_counted(engine: Engine) -> None:
    backend = Expiring(cluster())
    assert isinstance(backend, ExpiringLeaseBackend)
    report = service(engine, backend, SimClock(3.0)).run_once()
    assert backend.renewed == [(["a", "c"], 3.0, 0)]  # before any Start, as the whole queue was
    assert report.leases_renewed == 2


class HeldOnly(Expiring):
    """The core's queue is empty; one leased job outside it (held, or on a dependency) is due."""

    def __init__(self) -> None:
        super().__init__(cluster([]))

    def leases_due(self, job_ids: Sequence[str], now: float) -> list[str]:
        return [*job_ids, "held"]


def test_a_leased_job_outside_the_queue_is_renewed_while_the_queue_is_empty(engine: Engine) -> None:
    """Before, renewal ran only while the core's queue had a job: a held or dependent job alone
    in the queue lost its lease, and once released (or its dependency met) Slurm's own pass ran
    it wherever it chose (seen on 24.11: tests/e2e/test_slurm_rules_e2e.py's held job)."""
    backend = HeldOnly()
    report = service(engine, backend, SimClock(3.0)).run_once()
    assert report.pending == 0
    assert backend.renewed == [(["held"], 3.0, 0)]
    assert report.leases_renewed == 1
