"""The simulator models a shrink's notice as the Slurm backend carries it out (issue 39): the job
keeps every GPU, shown in flight, until the grace is over; then it shrinks and pays its transition."""

from __future__ import annotations

import pytest

from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.actions import Resize, Start
from railgang.daemon.core.model.elastic import ElasticRules
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.notice import SHRINK
from railgang.daemon.sim.traces.model import TraceJob
from tests.daemon.sim.test_backend import NODE1, cluster, job

BOTH = {"n01": tuple(range(8)), "n02": tuple(range(8))}


def _noticed() -> tuple[object, object]:
    backend, sink = cluster(transition_cost_s=30.0)
    backend.submit(job(gpus=16, duration=1000.0, elastic_min=8, elastic_max=16), 0.0)
    assert backend.apply([Start("j", BOTH, replicas=16)], 0.0)[0].ok
    (res,) = backend.apply([Resize("j", 8, NODE1, old_replicas=16, grace_s=45.0)], 100.0)
    assert res.ok
    return backend, sink


def test_the_notice_holds_every_gpu_and_shows_the_job_in_flight() -> None:
    backend, sink = _noticed()
    snap = backend.snapshot(120.0)  # type: ignore[attr-defined]
    assert snap.free_gpus == 0 and snap.running["j"].gpus == 16
    assert snap.running["j"].preempt_deadline == 145.0 and snap.running["j"].shrink_to == 8
    assert sink.last(SHRINK)[:3] == (145.0, SHRINK, "j")  # type: ignore[attr-defined]
    # asked again (or grown, or shrunk further) inside its notice: refused, nothing moves
    again = backend.apply([Resize("j", 8, NODE1, old_replicas=16, grace_s=45.0)], 130.0)  # type: ignore[attr-defined]
    assert not again[0].ok and "shrunk" in again[0].detail


def test_the_shrink_takes_effect_when_the_notice_ends() -> None:
    backend, sink = _noticed()
    t, kind, job_id, version = sink.last(SHRINK)  # type: ignore[attr-defined]
    assert backend.on_event(kind, job_id, version, t)  # type: ignore[attr-defined]
    snap = backend.snapshot(t)  # type: ignore[attr-defined]
    assert snap.free_gpus == 8 and snap.running["j"].gpus == 8
    assert snap.running["j"].preempt_deadline is None and snap.running["j"].shrink_to is None
    assert backend.records[0].resizes == 1  # type: ignore[attr-defined]


def test_a_job_preempted_inside_its_notice_goes_whole_and_the_shrink_lapses() -> None:
    backend, sink = _noticed()
    t, kind, job_id, version = sink.last(SHRINK)  # type: ignore[attr-defined]
    assert backend.withdraw("n02", 110.0, 60.0) == 1  # type: ignore[attr-defined]  (spot reclaim)
    assert not backend.on_event(kind, job_id, version, t)  # type: ignore[attr-defined]
    assert backend.running["j"].notice_until is None  # type: ignore[attr-defined]
    assert backend.running["j"].gpus == 16  # type: ignore[attr-defined]  (goes whole at its kill)


@pytest.mark.parametrize("grace", [0.0, 60.0])
def test_a_higher_class_job_starts_after_the_same_notice_the_daemon_gives(grace: float) -> None:
    from railgang.topology.fabric import fabric_from_shape

    jobs = [TraceJob(job_id="el", submit_time=0.0, gpus=16, duration_s=5000.0, elastic_min=8,
                     elastic_max=16, priority_class=3),
            TraceJob(job_id="prod", submit_time=1000.0, gpus=8, duration_s=100.0, priority_class=1)]
    config = CycleConfig(elastic=ElasticRules(shrink_grace_s=grace, min_interval_s=0.0))
    run = simulate(jobs, get("fifo"), fabric_from_shape(2, 8, 2), config=EngineConfig(cycle=config))
    records = {r.job_id: r for r in run.records}
    start = records["prod"].start
    assert start is not None and 1000.0 + grace <= start < 1000.0 + grace + 30.0
