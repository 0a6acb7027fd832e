"""Scaling curves fitted to measured samples/s (issue 33 item 2, core/model/speed_fit.py):
linear until two sizes are measured, Amdahl after, never better than linear; pollux sizes on
the fitted curve."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railgang.daemon.core.model.speed_fit import (
    DEFAULT,
    MEASURED,
    MIN_REPORTS,
    PRIOR,
    blend_cost,
    bound_claim,
    fit_curve,
    fit_serial,
    fitted,
)
from railgang.daemon.core.policies.registry import get
from tests.daemon.core.core_builders import cluster, job

N = MIN_REPORTS


def amdahl_rate(r1: float, s: float, k: int) -> float:
    return r1 / (s + (1 - s) / k)


def test_one_measured_size_is_still_a_straight_line() -> None:
    c = fit_curve({2: (180.0, 9)})
    assert c.source == DEFAULT and c(4) == 4.0 and c.rates == ((2, 180.0, 9),)


def test_two_sizes_fit_amdahl_exactly() -> None:
    c = fit_curve({1: (100.0, N), 4: (amdahl_rate(100.0, 0.2, 4), N)})
    assert c.source == MEASURED and c.serial == pytest.approx(0.2)
    assert c(8) == pytest.approx(1 / (0.2 + 0.8 / 8))


def test_a_size_counts_only_with_enough_reports() -> None:
    c = fit_curve({1: (100.0, N), 2: (100.0, N - 1)})
    assert c.source == DEFAULT and c(2) == 2.0


def test_super_linear_points_give_a_straight_line_and_flat_ones_a_flat_curve() -> None:
    assert fit_serial({1: (100.0, N), 2: (300.0, N)}) == 0.0
    assert fit_serial({1: (100.0, N), 2: (90.0, N)}) == 1.0
    flat = fitted(1.0, MEASURED)
    assert flat(1) == flat(8) == 1.0


def test_the_model_prior_shapes_a_job_measured_at_one_size() -> None:
    prior = {1: (50.0, N), 2: (amdahl_rate(50.0, 0.5, 2), N)}
    c = fit_curve({2: (60.0, N)}, prior)  # slower at 2 than the prior says
    assert c.source == PRIOR and 0.5 < c.serial < 1.0  # its own rate at 2 wins over the prior's
    assert fit_curve({}, prior).serial == pytest.approx(0.5)


def test_costs_blend_with_the_constant() -> None:
    assert blend_cost(30.0, ()) == 30.0
    assert blend_cost(30.0, (90.0,)) == 60.0
    assert blend_cost(30.0, (float("nan"), -1.0)) == 30.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0.0, 1e12])
def test_a_rate_that_is_no_rate_is_not_counted(bad: float) -> None:
    assert bound_claim(2, bad, {}) is None


def test_a_claim_above_k_times_a_smaller_size_is_clamped() -> None:
    assert bound_claim(4, 1e6, {1: (100.0, N)}) == pytest.approx(400.0)
    assert bound_claim(4, 1e6, {}, {1: (100.0, N)}) == pytest.approx(600.0)  # prior slack 1.5
    assert bound_claim(2, 1000.0, {2: (100.0, N)}) == pytest.approx(200.0)  # an outlier jump


@given(claims=st.lists(st.tuples(st.integers(1, 8), st.floats(allow_nan=True, allow_infinity=True)),
                       max_size=60))
def test_no_sequence_of_claims_gives_a_better_than_linear_curve(
        claims: list[tuple[int, float]]) -> None:
    """Whatever a job reports, its curve is never above a straight line, and never undefined."""
    own: dict[int, list[float]] = {}
    for k, sps in claims:
        med = {j: (sorted(v)[len(v) // 2], len(v)) for j, v in own.items()}
        got = bound_claim(k, sps, med)
        if got is not None:
            assert math.isfinite(got) and 0 < got <= 1e9
            own.setdefault(k, []).append(got)
    c = fit_curve({j: (sorted(v)[len(v) // 2], len(v)) for j, v in own.items()})
    assert 0.0 <= c.serial <= 1.0
    for k in range(1, 33):
        assert 1.0 - 1e-9 <= c(k) <= k + 1e-9


@pytest.mark.parametrize("policy", ["pollux", "default"])
def test_pollux_sizes_a_measured_sublinear_job_differently_from_a_linear_one(policy: str) -> None:
    """Two elastic jobs, 4 replicas of free GPUs: on straight lines they share the spare
    replicas; measured nearly flat, the first keeps one and the other gets both."""
    measured = fitted(0.9, MEASURED, ((1, 100.0, N), (2, 105.0, N)))

    def sizes(first_curve: fitted) -> dict[str, int]:
        snap = cluster(4).pending(
            job("a").gpus(8).tp(8).elastic(1, 3).at(0).speedup(first_curve),
            job("b").gpus(8).tp(8).elastic(1, 3).at(1)).build()
        return {w.job_id: w.replicas for w in get(policy).plan(snap, 0).order}

    assert sizes(fitted()) == {"a": 2, "b": 2}
    assert sizes(measured) == {"a": 1, "b": 3}
