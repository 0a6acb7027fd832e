"""A daemon running cycles hands the due leases to the backend's renewal thread and reports what
it renewed since; a one-shot cycle renews on its own path (issue 37 item 3, slurm/cli/renewer.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import Engine

from railgang.daemon.backend import BackgroundLeaseBackend
from railgang.daemon.clock import SimClock
from tests.daemon.service.conftest import cluster, service
from tests.daemon.service.test_cycle import Leasing


class Background(Leasing):
    """A lease backend with a renewal thread: the cycle hands leases over and reads the count."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.later: list[tuple[list[str], float, int]] = []

    def leases_due(self, job_ids: Sequence[str], now: float) -> list[str]:
        return list(job_ids)

    def renew_leases_later(self, job_ids: Sequence[str], now: float) -> tuple[int, dict[str, str]]:
        self.later.append((list(job_ids), now, len(self.accepted)))
        return 3, {"x": "Invalid job id specified"}


@pytest.mark.parametrize("background", [True, False])
def test_the_cycle_hands_leases_to_the_thread_only_when_asked(engine: Engine, background: bool) -> None:
    backend = Background(cluster())
    assert isinstance(backend, BackgroundLeaseBackend)
    report = service(engine, backend, SimClock(3.0), renew_in_background=background).run_once()
    if background:  # handed over before any Start; the report counts what the thread did
        assert backend.later == [(["a", "b", "c", "d", "zbig"], 3.0, 0)] and backend.renewed == []
        assert report.leases_renewed == 3
    else:  # a one-shot cycle renews on its own path and counts its own renewals
        assert backend.later == [] and backend.renewed == [(["a", "b", "c", "d", "zbig"], 3.0, 0)]
        assert report.leases_renewed == 4
