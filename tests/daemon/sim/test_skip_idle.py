"""Skipping idle cycles (``EngineConfig.skip_idle``, issue 12 speed) changes no schedule: every
policy, rigid and elastic, decides job for job what it decides with the core run at every cycle,
and the skip does happen on a trace whose queue empties."""

from __future__ import annotations

import dataclasses

import pytest

from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import EngineConfig, RunResult, simulate
from railgang.daemon.sim.progress import TopologyComm
from railgang.daemon.sim.replay import make_elastic
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.sim.schedule_pin import POLICIES, synthetic_jobs
from tests.daemon.sim.test_synthetic_trace import syn


def _light() -> list[TraceJob]:
    """A Philly-like trace at 50 % load on 64 GPUs: the queue empties often."""
    return [TraceJob(job_id=j.job_id, submit_time=j.submit_time, gpus=j.gpus,
                     duration_s=min(j.duration_s, 40_000.0), account=j.account)
            for j in syn.generate(150, gpus_total=64, load=0.5, seed=7, max_gpus=32)]


def _rows(run: RunResult) -> list[tuple[object, ...]]:
    return [(r.job_id, r.start, r.finish, r.preemptions, r.resizes, r.lost_gpu_s) for r in run.records]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("variant", ["rigid", "elastic"])
@pytest.mark.parametrize("trace", ["busy", "light"])
def test_skipping_idle_cycles_changes_nothing(policy: str, variant: str, trace: str) -> None:
    jobs = synthetic_jobs() if trace == "busy" else _light()
    if variant == "elastic":
        jobs = make_elastic(jobs)
    fabric = fabric_from_shape(8, 8, 4)
    runs = {}
    for skip in (True, False):
        config = dataclasses.replace(EngineConfig(), skip_idle=skip)
        runs[skip] = simulate(jobs, get(policy), fabric, comm=TopologyComm(fabric), config=config)
    assert _rows(runs[True]) == _rows(runs[False])
    assert runs[True].metrics.to_dict() == runs[False].metrics.to_dict()
    assert runs[True].cycles == runs[False].cycles


def test_the_light_rigid_trace_does_skip() -> None:
    fabric = fabric_from_shape(8, 8, 4)
    run = simulate(_light(), get("default"), fabric, comm=TopologyComm(fabric))
    assert 0 < run.skipped < run.cycles
