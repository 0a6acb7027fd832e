"""Capacity tiers and spot routing (daemon/core/model/tiers.py, DESIGN R-S9)."""

from __future__ import annotations

import pytest

from railgang.daemon.core.model.economics import spot_effective_cost
from railgang.daemon.core.model.job import Job, JobRequest
from railgang.daemon.core.model.tiers import (
    ON_DEMAND,
    SPOT,
    SpotRules,
    TierTerms,
    effective_usd_per_gpu_h,
    interruptions_per_day,
    overhead,
)


def big(gpus: int = 512, **kw: float) -> Job:
    return Job(JobRequest("big", gpus, **kw))  # type: ignore[arg-type]


def test_the_seeds_worked_example_from_its_inputs() -> None:
    """512 GPUs x 14 days at $2/GPU-h on demand; spot at a 65 % discount, 5 % checkpoint
    overhead, 14 interruptions a day, 30-minute restarts (DESIGN R-S9, chapter 8)."""
    gpus, days, on_demand_usd, discount = 512, 14, 2.0, 0.65
    productive_h = days * 24
    on_demand = gpus * productive_h * on_demand_usd
    spot = spot_effective_cost(gpus, productive_h, on_demand_usd * (1 - discount),
                               checkpoint_overhead=0.05, interruptions_per_day=14,
                               restart_h=0.5)
    assert round(on_demand) == 344_064
    assert round(spot.usd) == 161_567
    assert spot.hours == pytest.approx(336 + 16.8 + 196 * 0.5)
    assert 1 - spot.usd / on_demand == pytest.approx(0.530, abs=0.0005)  # 53 % saved
    assert spot.hours / productive_h - 1 == pytest.approx(0.342, abs=0.001)  # 34 % longer


def test_the_cores_overhead_is_the_same_equation() -> None:
    """spot.overhead (what routing uses) = T_total / T_productive of the worked example when the
    job's checkpoint and restart costs are the example's: 5 % overhead, 30-minute restarts."""
    job = big(checkpoint_interval_s=1200.0, checkpoint_cost_s=60.0, restore_cost_s=1800.0 - 600.0)
    terms = TierTerms({"": 0.70}, interruptions_per_node_day=14 / 64, notice_s=0.0)
    # 64 nodes of 8 GPUs: 14 interruptions a day; no notice: half an interval (600 s) lost
    assert interruptions_per_day(job, 64, terms) == pytest.approx(14)
    assert overhead(job, 64, terms) == pytest.approx(450.8 / 336)
    usd = effective_usd_per_gpu_h(job, ("h100", SPOT), 64, {SPOT: terms})
    assert 512 * 336 * usd == pytest.approx(161_567, abs=1)


TIERS = {ON_DEMAND: TierTerms({"v100": 2.48}),
         SPOT: TierTerms({"v100": 0.87}, interruptions_per_node_day=1.0, notice_s=120.0)}


@pytest.mark.parametrize(("gpus", "nodes", "allowed"), [
    (8, 1, True),  # 1 a day: cheap and calm
    (32, 4, True),  # 4 a day: at the cap
    (40, 5, False),  # 5 a day: over the cap, to on-demand
], ids=["one-node", "at-cap", "over-cap"])
def test_big_jobs_leave_spot_above_four_interruptions_a_day(gpus: int, nodes: int,
                                                           allowed: bool) -> None:
    assert SpotRules().allows(big(gpus), ("v100", SPOT), nodes, TIERS) is allowed
    assert SpotRules(cost_aware=False).allows(big(gpus), ("v100", SPOT), nodes, TIERS)
    assert SpotRules().allows(big(gpus), ("v100", ON_DEMAND), nodes, TIERS)


def test_spot_dearer_than_on_demand_is_refused_even_under_the_cap() -> None:
    # 4 nodes (4 a day, at the cap) and 12-hour restarts: spot ends up dearer than on-demand
    slow = big(32, restore_cost_s=43200.0)
    assert effective_usd_per_gpu_h(slow, ("v100", SPOT), 4, TIERS) > 2.48
    assert not SpotRules().allows(slow, ("v100", SPOT), 4, TIERS)
    assert SpotRules().allows(big(32), ("v100", SPOT), 4, TIERS)


def test_a_notice_that_covers_the_checkpoint_loses_less() -> None:
    job = big(8, checkpoint_cost_s=60.0)
    calm = TierTerms({"": 1.0}, 2.0, notice_s=120.0)
    abrupt = TierTerms({"": 1.0}, 2.0, notice_s=30.0)
    assert overhead(job, 1, calm) < overhead(job, 1, abrupt)
    assert overhead(job, 1, TierTerms({"": 1.0})) == 1.0  # never reclaimed: no overhead


def test_small_jobs_stay_on_spot_above_the_cap_while_it_is_cheaper() -> None:
    busy = {**TIERS, SPOT: TierTerms({"v100": 0.87}, interruptions_per_node_day=12.0)}
    assert SpotRules().allows(big(1), ("v100", SPOT), 1, busy)  # 12 a day, restarts in minutes
    assert not SpotRules().allows(big(8), ("v100", SPOT), 1, busy)  # a node's worth: capped
    assert not SpotRules(min_gpus=1).allows(big(1), ("v100", SPOT), 1, busy)
