"""The seed's worked examples, reproduced exactly (chapter 8; DESIGN R-S6, R-S8, R-S9)."""

from __future__ import annotations

import pytest

from railgang.daemon.core.model.economics import (
    completion_time_h,
    preemption_tax,
    spot_effective_cost,
    work_in_window,
)


def test_preemption_tax_is_96_dollars_for_the_64_gpu_fine_tune() -> None:
    assert preemption_tax(64, lost_min=15, save_min=20, reload_min=10, warmup_min=0,
                          usd_per_gpu_h=2.0) == pytest.approx(96.0)


def test_rigid_128_gpu_job_takes_32_hours() -> None:
    assert completion_time_h(24.0, [(0.0, 0.0), (8.0, 1.0)]) == pytest.approx(32.0)


def test_elastic_32_64_128_finishes_in_26_5_hours() -> None:
    # 32 GPUs = 25 % for 2 h, 64 = 50 % for 2 h, then 128 = 100 %: 5.5 h of work by hour 8.
    schedule = [(0.0, 0.25), (2.0, 0.5), (4.0, 1.0)]
    assert completion_time_h(24.0, schedule) == pytest.approx(26.5)
    assert 32.0 - completion_time_h(24.0, schedule) == pytest.approx(5.5)


@pytest.mark.parametrize(
    ("schedule", "resize_h", "epochs"),
    [
        ([(0.0, 1.0)], 0.0, 24.0),
        ([(0.0, 0.0), (4.0, 3.2)], 0.17, 64.0),
        ([(0.0, 1.0), (4.0, 1.8)], 0.17, 39.7),
    ],
    ids=["start-128-now", "wait-4h-for-512", "128-then-256-with-10min-resize"],
)
def test_epochs_over_24_hours(schedule: list[tuple[float, float]], resize_h: float, epochs: float) -> None:
    assert work_in_window(24.0, schedule, resize_h) == pytest.approx(epochs, abs=0.05)


def test_elastic_strategy_is_1_7x_small_and_38_percent_behind_gang() -> None:
    small = work_in_window(24.0, [(0.0, 1.0)])
    gang = work_in_window(24.0, [(0.0, 0.0), (4.0, 3.2)], 0.17)
    elastic = work_in_window(24.0, [(0.0, 1.0), (4.0, 1.8)], 0.17)
    assert elastic / small == pytest.approx(1.65, abs=0.01)
    assert 1 - elastic / gang == pytest.approx(0.38, abs=0.01)


def test_spot_example_512_gpus_14_days() -> None:
    on_demand = 512 * 336 * 2.0
    spot = spot_effective_cost(512, 336.0, 0.70, checkpoint_overhead=0.05,
                               interruptions_per_day=14, restart_h=0.5)
    assert on_demand == pytest.approx(344_064)
    assert spot.hours == pytest.approx(450.8)
    assert spot.usd == pytest.approx(161_567, abs=1)
    assert 1 - spot.usd / on_demand == pytest.approx(0.530, abs=0.001)
