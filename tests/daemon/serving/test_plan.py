"""Lending and taking back (plan.py) and the chapter's 1,024-GPU scenario from its own inputs."""

from __future__ import annotations

import pytest

from railgang.daemon.serving.fluid import Backlog, utilisation
from railgang.daemon.serving.model import Deployment
from railgang.daemon.serving.plan import PlanConfig, Upper, outcome, plan

MIN = 60.0


def chapter(mode: str, demand: list[int], buffer: float = 117.0) -> float:
    """The chapter: 1,024 GPUs; a 400-GPU serving pool; a 618-GPU training pool with a backlog;
    training borrows idle serving GPUs less a 117-GPU safety buffer."""
    dep = Deployment("serve", tp=1, max_replicas=400, switch_in_s=15 * MIN)
    tl = plan(dep, demand, Upper(demand, buffer), PlanConfig(step_s=MIN, mode=mode))  # type: ignore[arg-type]
    return utilisation([tl], Backlog(618), 1024).utilisation


def test_chapter_static_75_dynamic_88() -> None:
    demand = [150] * (24 * 60)  # 150 GPUs used on average
    assert chapter("static", demand) == pytest.approx((150 + 618) / 1024)
    assert round(chapter("static", demand), 2) == 0.75
    # 400 - 150 - 117 = 133 GPUs lent: (150 + 618 + 133) / 1024
    assert chapter("forecast", demand) == pytest.approx((150 + 618 + 133) / 1024, abs=1e-3)
    assert round(chapter("forecast", demand), 2) == 0.88


def test_chapter_diurnal_moves_gpus_twice_a_day_and_meets_demand() -> None:
    # night 100, day 186 GPUs (mean ~150); 08:00 ramp and 22:00 drop
    demand = [186 if 8 * 60 <= m < 22 * 60 else 100 for m in range(24 * 60)]
    dep = Deployment("serve", tp=1, max_replicas=400, switch_in_s=15 * MIN)
    tl = plan(dep, demand * 2, Upper(demand * 2, 117), PlanConfig(step_s=MIN))
    got = outcome([tl])
    assert got.unmet_replica_min == 0 and got.late_replicas == 0
    assert got.reactive_starts == 0
    lent = tl.lent_gpus
    changes = [m for m in range(1, len(lent)) if lent[m] != lent[m - 1]]
    assert len(changes) == 4  # two days, twice a day
    ramp = next(m for m in changes if lent[m] < lent[m - 1])
    assert 8 * 60 - 25 <= ramp <= 8 * 60 - 15  # taken back ahead of 08:00 by switch-in + margin
    assert utilisation([tl], Backlog(618), 1024).utilisation > 0.87


def test_unforecast_surge_is_served_reactively_and_counted() -> None:
    demand = [10] * 120
    demand[60:90] = [20] * 30  # not in the forecast
    dep = Deployment("d", tp=8, max_replicas=30, switch_in_s=10 * MIN)
    tl = plan(dep, demand, Upper([10] * 120, 1), PlanConfig(step_s=MIN))
    got = outcome([tl])
    assert got.reactive_starts == 9  # 20 needed, 11 held
    assert got.late_replicas == 9
    assert got.unmet_replica_min == pytest.approx(9 * 10)  # 9 replicas short for the switch-in
    assert tl.ready[75] == 20


def test_reactive_mode_is_late_at_every_ramp_forecast_is_not() -> None:
    demand = [5] * 60 + [15] * 60
    dep = Deployment("d", tp=2, max_replicas=20, switch_in_s=10 * MIN)
    ahead = outcome([plan(dep, demand, Upper(demand, 0), PlanConfig(step_s=MIN))])
    react = outcome([plan(dep, demand, Upper(demand, 0), PlanConfig(step_s=MIN, mode="reactive"))])
    assert ahead.unmet_replica_min == 0
    assert react.unmet_replica_min == pytest.approx(10 * 10)


@pytest.mark.parametrize("seed", range(20))
def test_invariants_on_random_demand(seed: int) -> None:
    import random

    rng = random.Random(seed)
    demand = [rng.randrange(0, 12) for _ in range(300)]
    fc = [max(0, d + rng.randrange(-3, 4)) for d in demand]
    dep = Deployment("d", tp=rng.choice([1, 2, 4, 8]), min_replicas=1, max_replicas=10,
                     switch_in_s=rng.choice([60.0, 300.0, 1200.0]))
    tl = plan(dep, demand, Upper(fc, rng.random() * 3), PlanConfig(step_s=MIN))
    for d, r, h, u, lent in zip(tl.demand, tl.ready, tl.held, tl.unmet, tl.lent_gpus, strict=True):
        assert 0 <= r <= h <= dep.max_replicas
        assert u == max(0, d - r)
        assert 0 <= lent <= dep.pool_gpus and lent == dep.pool_gpus - h * dep.tp
    static = plan(dep, demand, None, PlanConfig(step_s=MIN, mode="static"))
    assert sum(static.unmet) == sum(max(0, d - dep.max_replicas) for d in demand)
