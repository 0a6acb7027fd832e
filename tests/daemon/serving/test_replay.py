"""Serving demand beside a training trace through the engine: nodes open and close on the plan,
jobs on a closing node save and requeue, and dynamic beats static on a backlogged cluster."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core.policies import registry
from railgang.daemon.serving.forecast import ForecastConfig
from railgang.daemon.serving.model import Demand, Deployment, ServingSet
from railgang.daemon.serving.replay import LentNodes, ServingKnobs, plan_window
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


def test_lent_nodes_follow_the_plan_in_whole_nodes() -> None:
    lent = LentNodes(["s1", "s2", "s3"], 8, [0, 7, 8, 17, 24, 99, 16], 60.0, 300.0)
    assert lent.events() == [(0.0, "0"), (120.0, "1"), (180.0, "2"), (240.0, "3"),
                             (360.0, "2")]
    late = LentNodes(["s1", "s2", "s3"], 8, [0, 7, 8, 17, 24, 99, 16], 60.0, 300.0, origin=200.0)
    assert late.events() == [(200.0, "2"), (240.0, "3"), (360.0, "2")]  # the engine starts at 200


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
    knobs = ServingKnobs(history_days=7, buffer_gpus=8.0, forecast=FAST)
    static, ahead = compare(jobs, registry.get("fifo"), fabric, serving(), knobs)
    assert ahead.utilisation > static.utilisation + 0.05
    assert ahead.training_gpu_h > static.training_gpu_h
    assert ahead.run.metrics.mean_jct_s < static.run.metrics.mean_jct_s
    assert ahead.closings_hit > 0 and ahead.jobs_signalled > 0  # the morning take-back
    # every job ends once, reclaimed ones included (requeued, not lost)
    assert ahead.run.metrics.finished == static.run.metrics.finished == len(jobs)
    assert sum(r.interruptions for r in ahead.run.records) == ahead.jobs_signalled
    assert static.planned.outcome.unmet_replica_min == 0
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
    from dataclasses import replace

    jobs = [replace(j, elastic_min=1, elastic_max=j.gpus) if j.gpus > 1 else j
            for j in backlog()]
    fabric = fabric_from_shape(6 + 14, 8, 4)
    knobs = ServingKnobs(history_days=7, buffer_gpus=8.0, forecast=FAST)
    (ahead,) = compare(jobs, registry.get("default"), fabric, serving(), knobs, ("forecast",))
    assert ahead.jobs_shrunk > 0  # instead of a checkpoint, a stop and a requeue
    assert ahead.run.metrics.finished == len(jobs)
    assert ahead.row()["jobs_shrunk"] == ahead.jobs_shrunk


def test_under_the_core_rules_rigid_jobs_without_a_time_limit_never_borrow() -> None:
    """With ``core_rules`` the open nodes reach the core as lent serving capacity: the rigid
    backlog (no time limits) never runs on them, so no take-back ever hits a job; the same jobs
    with time limits shorter than the night do borrow."""
    from dataclasses import replace

    fabric = fabric_from_shape(6 + 14, 8, 4)
    knobs = ServingKnobs(history_days=7, buffer_gpus=8.0, forecast=FAST, core_rules=True)
    rigid = backlog()
    (strict,) = compare(rigid, registry.get("fifo"), fabric, serving(), knobs, ("forecast",))
    assert strict.closings_hit == 0 and strict.jobs_signalled == 0
    (plain,) = compare(rigid, registry.get("fifo"), fabric, serving(),
                       replace(knobs, core_rules=False), ("forecast",))
    assert plain.training_gpu_h > strict.training_gpu_h
    limited = [replace(j, time_limit_s=j.duration_s * 1.1) for j in rigid]
    (short,) = compare(limited, registry.get("fifo"), fabric, serving(), knobs, ("forecast",))
    assert short.training_gpu_h > strict.training_gpu_h
