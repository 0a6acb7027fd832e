"""The API shows a waiting job's start-time estimate (``data.estimate``) as the daemon wrote it."""

from __future__ import annotations

from railgang.daemon.clock import SimClock
from railgang.daemon.service.estimate import EstimateConfig, StartEstimator
from tests.daemon.api.conftest import Api
from tests.daemon.service.conftest import cluster, service


def test_a_waiting_job_carries_its_estimate(api: Api) -> None:
    est = StartEstimator("fifo", config=EstimateConfig(wall_s=5.0))
    service(api.engine, cluster(), SimClock(0.0), estimator=est).run_once()
    job = api.client.get("/v1/jobs/zbig", headers=api.admin).json()
    assert job["state"] == "waiting"
    e = job["data"]["estimate"]
    assert (e["status"], e["start_s"], e["policy"], e["simulations"]) == ("estimated", 3600.0,
                                                                          "fifo", 9)
    running = api.client.get("/v1/jobs/a", headers=api.admin).json()
    assert running["state"] == "running" and "estimate" not in running["data"]
