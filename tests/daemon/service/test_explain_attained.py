"""``railgang explain`` shows a job's attained service (issue 33 item 1): the GPU-seconds Slurm
showed as of the stored row, grown by the GPUs it holds times the row's age (a running job's row
is kept while its nodes stay the same), and its Tiresias level under ``tiresias``."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from railgang.daemon.config import DaemonSettings
from railgang.daemon.core import Job, JobRequest
from railgang.daemon.core.model.job import JobState
from railgang.daemon.service.explain import _running_row
from railgang.daemon.service.status import as_dict, render
from railgang.topology.fabric import fabric_from_shape

T = 1796057400.0


def _stored(row: Any) -> SimpleNamespace:
    return SimpleNamespace(**dataclasses.asdict(row), cycle_id=3, updated_at=datetime.fromtimestamp(T, UTC))


def test_a_running_jobs_attained_service_grows_with_the_rows_age() -> None:
    job = Job(JobRequest("7", 8), JobState(attained_gpu_s=3600.0))
    row = _running_row("7", "a", 3, {"n01": tuple(range(8))}, fabric_from_shape(8, 8, 4),
                       "tiresias", None, 1, "observed", job, now=T)
    e = as_dict(_stored(row), T + 450)  # type: ignore[arg-type]
    assert e["attained_gpu_h"] == 2.0  # (3600 + 8 x 450) / 3600
    e["tiresias_level"] = 1
    assert "attained service: 2.000 GPU-h over all its runs (Tiresias level 1)" in render(e)


def test_a_row_without_attained_service_renders_as_before() -> None:
    row = _running_row("7", "a", 3, {"n01": tuple(range(8))}, fabric_from_shape(8, 8, 4),
                       "fifo", None, 1, "observed", None)
    e = as_dict(_stored(row), T)  # type: ignore[arg-type]
    assert "attained_gpu_h" not in e and "attained service" not in render(e)


@pytest.mark.parametrize("bad", [(), (10.0, 1.0), (0.0, 1.0), (1.0, float("inf")), (1.0, 1.0), (1.0, float("nan"), 3.0)])
def test_tiresias_thresholds_must_be_positive_and_rising(bad: tuple[float, ...]) -> None:
    with pytest.raises(ValidationError):
        DaemonSettings(tiresias_thresholds_gpu_h=bad)
    assert DaemonSettings(tiresias_thresholds_gpu_h=(0.001, 0.01)).tiresias_thresholds_gpu_h == (0.001, 0.01)


def test_the_daemon_builds_tiresias_with_the_thresholds_of_its_settings() -> None:
    from railgang.daemon.config import Settings
    from railgang.daemon.cycle_settings import cycle_from  # what daemon run builds its policy with

    policy = cycle_from(Settings(daemon=DaemonSettings(
        policy="tiresias", tiresias_thresholds_gpu_h=(0.002, 0.5)))).policy()
    assert policy.thresholds_gpu_h == (0.002, 0.5)  # type: ignore[attr-defined]
