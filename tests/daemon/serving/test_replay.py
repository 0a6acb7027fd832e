"""Serving demand beside a training trace through the engine, the daemon's serving step deciding
(issue 34 item 3): the pool is lent at night and taken back in the morning by the core's own
evictions, borrowers follow the core's rules, and dynamic beats static on a backlogged cluster."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core.policies import registry
from railgang.daemon.serving.forecast import ForecastConfig
from railgang.daemon.serving.model import Demand, Deployment, ServingSet
from railgang.daemon.serving.replay import ServingKnobs, SimServing, declare, plan_window
from railgang.daemon.serving.simulate import compare, table
from railgang.daemon.serving.synth import DemandShape, demand_series
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

STEP = 900.0
FAST = ForecastConfig(step_s=1800.0)  # half the samples of the default: a quicker fit


def serving(days: int = 9, noise: float = 0.03) -> ServingSet:
    vals = demand_series(DemandShape(low=2, peak=12, noise=noise), days, STEP, seed=3)
    dep = Deployment("chat", tp=8, max_replicas=14, switch_in_s=900)
    return ServingSet((dep,), {"chat": Demand("chat", tuple((k * STEP, v)
                                                           for k, v in enumerate(vals)))})


def backlog(n: int = 150, seed: int = 1) -> list[TraceJob]:
    rng = random.Random(seed)
    return [TraceJob(f"j{i}", i * 900.0, rng.choice([1, 2, 4, 8, 8, 16]),
                     rng.uniform(1800, 20000)) for i in range(n)]


def test_the_replay_records_what_the_serving_step_did() -> None:
    """Replicas are class-0 jobs of the deployment; what serving got is recorded at every plan
    step once that step's cycle ran: no demand unmet with a buffer, the pool lent in whole
    nodes at night and held at noon."""
    fabric = fabric_from_shape(6 + 14, 8, 4)
    sset = serving()
    declared = declare(fabric, sset)
    assert [len(d.nodes) for d in declared] == [14] and declared[0].nodes[-1] == "n20"
    knobs = ServingKnobs(history_days=7, buffer_gpus=8.0, forecast=FAST, lend_rigid=True)
    (ahead,) = compare(backlog(), registry.get("fifo"), fabric, sset, knobs, ("forecast",))
    tl = ahead.planned.timelines[0]
    steps = round(ahead.planned.window_s / knobs.step_s)
    assert len(tl.demand) == len(tl.ready) == len(tl.lent or []) == steps
    assert ahead.planned.outcome.unmet_replica_min == 0 and tl.late == 0
    assert all(g % 8 == 0 for g in tl.lent or [])  # whole nodes
    night, noon = (tl.lent or [])[3 * 60], (tl.lent or [])[14 * 60]
    assert night > noon and night >= 8 * 8
    assert all(r >= d for d, r in zip(tl.demand, tl.ready, strict=True))
    stepper = SimServing(sset, "static", knobs, declared, 8)
    assert len(stepper.replicas()) == 14
    assert {j.priority_class for j in stepper.replicas()} == {0}


def test_static_never_lends_forecast_lends_at_night() -> None:
    knobs = ServingKnobs(history_days=7, buffer_gpus=8.0, forecast=FAST)
    static, ahead = plan_window(serving(), "static", knobs), plan_window(serving(), "forecast", knobs)
    assert set(static.lent_gpus) == {0}
    lent = ahead.lent_gpus
    per_day = round(86400 / knobs.step_s)
    night, noon = lent[3 * 60], lent[14 * 60]  # 03:00 and 14:00 of the first window day
    assert night > noon >= 0 and night >= 8 * 8
    assert len(lent) == 2 * per_day - STEP / 60  # the window ends at the last demand point


def test_dynamic_gains_training_hours_and_keeps_jobs_whole() -> None:
    jobs = backlog()
    fabric = fabric_from_shape(6 + 14, 8, 4)
    knobs = ServingKnobs(history_days=7, buffer_gpus=8.0, forecast=FAST, lend_rigid=True)
    static, ahead = compare(jobs, registry.get("fifo"), fabric, serving(), knobs)
    assert ahead.utilisation > static.utilisation + 0.05
    assert ahead.training_gpu_h > static.training_gpu_h
    assert ahead.run.metrics.mean_jct_s < static.run.metrics.mean_jct_s
    assert ahead.closings_hit > 0 and ahead.jobs_signalled > 0  # the morning take-back
    # every job ends once, the ones taken back included (requeued, not lost); replicas are
    # not training jobs
    assert ahead.run.metrics.finished == static.run.metrics.finished == len(jobs)
    assert sum(r.preemptions for r in ahead.run.records) > 0  # (one may end inside its grace)
    assert static.planned.outcome.unmet_replica_min == 0 and static.planned.outcome.lent_gpu_h == 0
    row = ahead.row()
    assert row["serving_unmet_share"] == pytest.approx(ahead.planned.outcome.unmet_share, abs=1e-6)
    text = "\n".join(table([static, ahead]))
    assert "training GPU-h gained (forecast vs static)" in text and "utilisation" in text


def test_forecast_mode_uses_the_quantile_buffer() -> None:
    knobs = ServingKnobs(history_days=7, forecast=FAST)
    got = plan_window(serving(noise=0.1), "forecast", knobs)
    assert got.buffers["chat"] > 0 and got.forecast_mae["chat"] > 0
    assert got.outcome.unmet_share < 0.05


def test_elastic_borrowers_shrink_off_a_closing_node() -> None:
    """The take-back is the core's eviction for a replica: elastic borrowers with replicas off
    the pool shrink instead of stopping."""
    from dataclasses import replace

    jobs = [replace(j, elastic_min=1, elastic_max=j.gpus) if j.gpus > 1 else j
            for j in backlog()]
    fabric = fabric_from_shape(6 + 14, 8, 4)
    knobs = ServingKnobs(history_days=7, buffer_gpus=8.0, forecast=FAST)
    (ahead,) = compare(jobs, registry.get("default"), fabric, serving(), knobs, ("forecast",))
    assert ahead.jobs_shrunk > 0  # instead of a checkpoint, a stop and a requeue
    assert ahead.run.metrics.finished == len(jobs)
    assert ahead.row()["jobs_shrunk"] == ahead.jobs_shrunk
    # a take-back waits for the borrowers' notice: a replica may be late by that, no more
    assert ahead.planned.outcome.unmet_share < 0.005


def test_rigid_jobs_without_a_time_limit_never_borrow() -> None:
    """Lent nodes reach the core as ``Snapshot.serving``: the rigid backlog (no time limits)
    never runs on them, so no take-back ever hits a job; with ``lend_rigid`` it borrows, and so
    do the same jobs with time limits shorter than the night."""
    from dataclasses import replace

    fabric = fabric_from_shape(6 + 14, 8, 4)
    knobs = ServingKnobs(history_days=7, buffer_gpus=8.0, forecast=FAST)
    rigid = backlog()
    (strict,) = compare(rigid, registry.get("fifo"), fabric, serving(), knobs, ("forecast",))
    assert strict.closings_hit == 0 and strict.jobs_signalled == 0
    assert strict.planned.outcome.lent_gpu_h > 0
    (plain,) = compare(rigid, registry.get("fifo"), fabric, serving(),
                       replace(knobs, lend_rigid=True), ("forecast",))
    assert plain.training_gpu_h > strict.training_gpu_h
    limited = [replace(j, time_limit_s=j.duration_s * 1.1) for j in rigid]
    (short,) = compare(limited, registry.get("fifo"), fabric, serving(), knobs, ("forecast",))
    assert short.training_gpu_h > strict.training_gpu_h
