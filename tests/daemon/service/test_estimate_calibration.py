"""Calibrated start-time intervals: split-conformal widening from the intervals that missed."""

from __future__ import annotations

import logging
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.service.estimate import EstimateConfig, StartEstimator, render_estimate
from railgang.daemon.service.estimate_calibration import (
    IntervalCalibration,
    Shown,
    online_coverage,
    replay,
)
from tests.daemon.service.test_estimate import EXACT, WHOLE, gang, req, snap
from tests.support.exports import assert_public_surface


def test_a_start_inside_scores_at_most_zero_and_a_miss_by_its_log_distance() -> None:
    cal = IntervalCalibration(quantum_s=60.0)
    assert cal.score(600.0, 3600.0, 1200.0) < 0
    assert cal.score(600.0, 3600.0, 7260.0) == pytest.approx(math.log(7320 / 3660))
    assert cal.score(600.0, 3600.0, 0.0) == pytest.approx(math.log(660 / 60))
    assert cal.score(600.0, None, 10**9) < 0  # unbounded above: only a start too early misses


def intervals(n: int, seed: int, *, spread: float, bias: float, below: float,
              above: float) -> list[tuple[float, float, float]]:
    """``(lo, hi, actual)``: actual starts log-normal (sigma ``spread``) around an hour, a point
    estimate off by a log-normal factor (mean ``bias``, sigma 1), the interval from
    ``point / below`` to ``point * above``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        actual = rng.lognormvariate(math.log(3600.0), spread)
        point = actual * math.exp(rng.gauss(bias, 1.0))
        out.append((point / below, point * above, actual))
    return out


def cases(n: int, seed: int) -> list[tuple[float, float, float]]:
    """Intervals 1.8x wide around a point estimate that is off by a log-normal factor
    (sigma 1): they hold about a quarter of the actual starts."""
    return intervals(n, seed, spread=1.5, bias=0.0, below=1.35, above=1.35)


def covered(rows: list[tuple[float, float | None, float]]) -> float:
    return sum(lo <= a <= (math.inf if hi is None else hi) for lo, hi, a in rows) / len(rows)


def test_widened_intervals_cover_the_target_share_of_new_starts() -> None:
    cal = IntervalCalibration(coverage=0.8, keep=2000)
    for lo, hi, actual in cases(2000, seed=1):
        cal.add(lo, hi, actual)
    fresh = cases(2000, seed=2)
    raw = covered([(lo, hi, a) for lo, hi, a in fresh])
    wide = covered([(*cal.widen(lo, hi), a) for lo, hi, a in fresh])
    assert raw < 0.35
    assert 0.76 <= wide <= 0.84
    assert (cal.describe()["widened_by"] or 0) > 1.5


def test_each_end_moves_by_its_own_misses() -> None:
    # estimates from time limits alone are late: every miss is a start before lo
    cal = IntervalCalibration(min_scores=5, quantum_s=1.0)
    for k in range(40):
        cal.add(1000.0, 2000.0, 1000.0 / (2.0 + k % 4))  # 2-5x early
    early, late = cal.margins() or (0.0, 0.0)
    assert early > math.log(4.0) and late == 0.0
    lo, hi = cal.widen(1000.0, 2000.0)
    assert lo < 1000.0 / 4 and hi == 2000.0


def drifting(n: int, seed: int) -> list[tuple[float, float, float | None, float]]:
    """One interval a minute, each job starting 30 min after it; the point estimate's log
    error grows over the stream (sigma 0.3 -> 2.3), as on a queue that keeps growing."""
    rng = random.Random(seed)
    out: list[tuple[float, float, float | None, float]] = []
    for i in range(n):
        actual = 1800.0
        point = actual * math.exp(rng.gauss(0.0, 0.3 + 2.0 * i / n))
        out.append((60.0 * i, point / 1.2, point * 1.2, actual))
    return out


def test_the_level_follows_drift_where_a_fixed_quantile_falls_behind() -> None:
    fixed = online_coverage(drifting(3000, seed=5), IntervalCalibration(step=0.0, keep=3000))
    adaptive = online_coverage(drifting(3000, seed=5), IntervalCalibration(step=0.02, keep=3000))
    assert fixed.once_calibrated is not None and adaptive.once_calibrated is not None
    assert fixed.once_calibrated < 0.75
    assert abs(adaptive.once_calibrated - 0.8) < 0.03


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31))
def test_on_an_exchangeable_stream_the_shown_intervals_hold_their_stated_coverage(
        seed: int) -> None:
    rows = [(60.0 * i, lo, hi, a) for i, (lo, hi, a) in enumerate(cases(1500, seed))]
    cov = online_coverage(rows, IntervalCalibration(coverage=0.8))
    assert cov.once_calibrated is not None and 0.75 <= cov.once_calibrated <= 0.85
    assert cov.raw_width_s is not None and cov.shown_width_s is not None
    assert cov.shown_width_s > cov.raw_width_s


def test_nothing_changes_before_enough_starts_or_when_the_intervals_already_hold() -> None:
    cal = IntervalCalibration(min_scores=20)
    for lo, hi, actual in cases(19, seed=3):
        cal.add(lo, hi, actual)
    assert cal.margin() is None and cal.widen(100.0, 200.0) == (100.0, 200.0)
    good = IntervalCalibration(min_scores=5)
    for _ in range(50):
        good.add(0.0, 10_000.0, 1000.0)  # every start well inside: never narrowed
    assert good.margin() == 0.0 and good.widen(100.0, 200.0) == (100.0, 200.0)


@given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 1e6), st.floats(0, 1e6)),
                min_size=1, max_size=60),
       st.floats(0, 1e6), st.floats(0, 1e6))
def test_widening_only_ever_grows_an_interval(scores: list[tuple[float, float, float]],
                                             a: float, b: float) -> None:
    cal = IntervalCalibration(min_scores=1)
    for lo, hi, actual in scores:
        cal.add(min(lo, hi), max(lo, hi), actual)
    lo, hi = min(a, b), max(a, b)
    wlo, whi = cal.widen(lo, hi)
    assert whi is not None and 0.0 <= wlo <= lo + 1e-6 and whi >= hi - 1e-6


def test_the_daemon_settles_shown_intervals_when_jobs_start_and_forgets_cancelled_ones() -> None:
    cal = IntervalCalibration(min_scores=1)
    for job in ("b", "c", "d"):
        cal.shown(job, 0.0, 600.0, 1200.0)
    b = req("b", 8)
    # b started at 3,000 s (a miss above), c was cancelled, d still waits
    assert cal.observe(snap([gang(b, {"n01": tuple(range(8))}, start=3000.0)], [req("d", 8)],
                            now=3010.0)) == 1
    assert cal.scores == 1 and cal.margin() == pytest.approx(math.log(3060 / 1260))
    assert cal.observe(snap([], [req("d", 8)], now=3020.0)) == 0  # c is not scored, ever


def test_one_long_wait_keeps_a_bounded_number_of_intervals() -> None:
    cal = IntervalCalibration(per_job=4)
    for t in range(10):
        cal.shown("b", float(t), 0.0, 1.0)
    assert cal.observe(snap([gang(req("b", 16), WHOLE, start=20.0)], [], now=21.0)) <= 4


def test_online_coverage_uses_only_starts_known_at_each_moment() -> None:
    # the first interval misses; the second is made before that miss is known, the third after
    rows = [(0.0, 10.0, 20.0, 5000.0), (100.0, 10.0, 20.0, 15.0), (6000.0, 10.0, 20.0, 300.0)]
    cov = online_coverage(rows, IntervalCalibration(min_scores=1, quantum_s=1.0))
    assert cov.intervals == 3 and cov.raw == pytest.approx(1 / 3)
    assert cov.calibrated == 1 and cov.once_calibrated == 1.0  # only the third is widened: holds
    assert cov.shown == pytest.approx(2 / 3)


def test_online_coverage_takes_intervals_open_beyond_the_horizon() -> None:
    # two made at once, same start and lower bound, one without an upper bound: no comparison
    # of None with a float (the no-profile benchmark crashed on this)
    rows = [(0.0, 10.0, None, 15.0), (0.0, 10.0, 20.0, 15.0)]
    cov = online_coverage(rows, IntervalCalibration(min_scores=1, quantum_s=1.0))
    assert cov.intervals == 2 and cov.raw == 1.0


def test_explain_shows_the_widened_interval_and_says_so() -> None:
    cal = IntervalCalibration(min_scores=1)
    cal.add(0.0, 1000.0, 4000.0)  # one miss by ~4x, late: only the upper end moves
    est = StartEstimator("default", config=EXACT, calibration=cal)
    rows = est.refresh(snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8)]))
    b = rows["b"]
    assert b["raw_p90_s"] == 3600.0 and b["p90_s"] > 3600.0 * 3 and b["p10_s"] == 3600.0
    assert b["interval"]["calibrated_on"] == 1 and b["interval"]["earlier_by"] == 1.0
    assert "widened x" in render_estimate(b) and "by 1 past starts" in render_estimate(b)


def test_public_surface() -> None:
    assert_public_surface("railgang.daemon.service.estimate_calibration",
                          {"Coverage", "IntervalCalibration", "Outcome", "Shown",
                           "online_coverage", "replay"})


def test_the_database_keeps_the_newest_scores_of_each_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from railgang.daemon.service.estimate_history import save_scores, stored_scores
    from railgang.db.session import session_scope
    from tests.daemon.api.dbs import fresh_engine

    with fresh_engine("sqlite", tmp_path, None) as engine:
        est = StartEstimator("fifo", calibration=IntervalCalibration(keep=3))
        est.cluster = "c1"
        for batch in ([0.1, 0.2], [0.3, 0.4, 0.5], [0.6] * 30):
            est.calibration._unsaved.extend(batch)
            with session_scope(engine) as s:
                assert save_scores(s, est, 1.0) == len(batch)
        with session_scope(engine) as s:
            kept = stored_scores(s, cluster="c1", limit=1000)
            assert save_scores(s, est, 2.0) == 0  # nothing new
        assert kept == [0.6] * 30  # 10 x keep newest rows of the cluster
        loaded = IntervalCalibration(keep=3)
        assert loaded.load([*kept, math.nan]) == 30 and loaded.scores == 3


def one_sided(n: int, seed: int) -> list[tuple[float, float, float]]:
    """Intervals whose upper end never misses (10x above the point) and whose lower end misses
    about 40 % of starts, as from estimates that start jobs too late."""
    return intervals(n, seed, spread=1.0, bias=0.25, below=1.2, above=10.0)


def test_a_side_that_never_misses_leaves_its_share_of_misses_to_the_other() -> None:
    # each side aiming at alpha/2 with the upper end never narrowed covered ~90 %, not 80 %
    cal = IntervalCalibration(coverage=0.8, keep=3000, step=0.0)
    for lo, hi, actual in one_sided(3000, seed=1):
        cal.add(lo, hi, actual)
    early_level, late_level = cal.levels()
    assert late_level is None and early_level == pytest.approx(0.2, abs=0.02)
    early, late = cal.margins() or (0.0, 0.0)
    assert early > 0.0 and late == 0.0
    fresh = one_sided(3000, seed=2)
    assert 0.77 <= covered([(*cal.widen(lo, hi), a) for lo, hi, a in fresh]) <= 0.83


def test_both_sides_missing_more_than_their_share_split_the_misses_evenly() -> None:
    cal = IntervalCalibration(min_scores=5, quantum_s=1.0, step=0.0)
    for k in range(100):
        cal.add(1000.0, 2000.0, 100.0 if k % 2 else 20_000.0)  # half far early, half far late
    early, late = cal.levels()
    assert early == pytest.approx(0.1) and late == pytest.approx(0.1)


def widened(cal: IntervalCalibration, steps: int = 25) -> None:
    for _ in range(steps):
        cal.add(1000.0, 2000.0, 1500.0)  # inside: calibrated, margins 0
    assert cal.margins() == (0.0, 0.0)


def test_a_miss_above_counts_as_soon_as_the_shown_upper_end_passes_and_only_once() -> None:
    cal = IntervalCalibration(quantum_s=1.0, step=0.01)
    widened(cal)
    cal.shown("b", 0.0, 100.0, 200.0)
    assert cal.overdue(150.0) == 0 and cal.alpha == pytest.approx(0.2)
    assert cal.overdue(250.0) == 1  # still waiting past its p90: missed, known now
    assert cal.alpha == pytest.approx(0.2 + 0.01 * (0.2 - 1.0))
    assert cal.overdue(300.0) == 0  # once
    assert cal.started("b", 400.0) == 1  # scored when it starts, no second step
    assert cal.alpha == pytest.approx(0.2 + 0.01 * (0.2 - 1.0))


def test_every_shown_interval_is_one_step_not_every_job() -> None:
    # a long wait shows many intervals; the coverage promised is per interval
    cal = IntervalCalibration(quantum_s=1.0, step=0.01)
    widened(cal)
    for t in range(3):
        cal.shown("b", float(t), 10.0, 20.0)  # all three inside
    assert cal.started("b", 15.0) == 3
    assert cal.alpha == pytest.approx(0.2 + 3 * 0.01 * 0.2)


def test_a_cancelled_job_is_forgotten_with_its_due_intervals() -> None:
    cal = IntervalCalibration(quantum_s=1.0)
    widened(cal)
    cal.shown("b", 0.0, 10.0, 20.0)
    cal.forget("b")
    assert cal.overdue(1e6) == 0 and cal.started("b", 30.0) == 0


def test_replay_settles_each_job_once_and_keeps_the_input_order() -> None:
    rows = [(0.0, 10.0, 20.0, 15.0, "a"), (0.0, 10.0, 20.0, 500.0, "b"),
            (100.0, 10.0, 20.0, 400.0, "b"), (1000.0, 10.0, 20.0, 15.0, "c")]
    out = replay(rows, IntervalCalibration(min_scores=1, quantum_s=1.0))
    assert [o.raw_inside for o in out] == [True, False, False, True]
    assert [o.calibrated for o in out] == [False, False, True, True]


TIME = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                 st.floats(-1e6, 1e6), st.sampled_from([0.0, 1e308, -0.0]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), TIME, TIME, st.one_of(st.none(), TIME), TIME),
                max_size=40))
def test_hostile_times_never_crash_or_poison_the_calibration(
        events: list[tuple[str, float, float, float | None, float]]) -> None:
    cal = IntervalCalibration(min_scores=1, quantum_s=60.0)
    for lo, hi, actual in cases(30, seed=4):
        cal.add(lo, hi, actual)
    for job, made, lo_s, hi_s, start in events:
        cal.shown(job, made, lo_s, hi_s)
        cal.add(lo_s, hi_s, start - made if math.isfinite(start - made) else start, job)
        cal.overdue(start)
        cal.started(job, start)
    m = cal.margins()
    assert m is not None and all(math.isfinite(x) and x >= 0.0 for x in m)
    assert 0.0 <= cal.alpha <= 1.0
    assert all(math.isfinite(x) for x in cal.drain_new())
    wlo, whi = cal.widen(600.0, 3600.0)
    assert math.isfinite(wlo) and 0.0 <= wlo <= 600.0 and (whi is None or whi >= 3600.0)


def test_a_time_that_is_not_one_is_logged_with_the_job_and_skipped(
        caplog: pytest.LogCaptureFixture) -> None:
    cal = IntervalCalibration(min_scores=1)
    with caplog.at_level(logging.WARNING):
        cal.shown("job-nan", math.nan, 10.0, 20.0)
        cal.shown("job-neg", 0.0, -5.0, 20.0)
        assert not cal.add(10.0, math.inf, 30.0, "job-inf")
        assert cal.settle([Shown(0.0, 10.0, 20.0, None, "job-late")], math.nan) == 0
    said = " ".join(r.getMessage() for r in caplog.records)
    for job in ("job-nan", "job-neg", "job-inf", "job-late"):
        assert job in said
    assert cal.scores == 0 and cal.observe(snap([], [])) == 0


def test_a_huge_margin_leaves_the_upper_end_unbounded_not_infinite() -> None:
    cal = IntervalCalibration(min_scores=1, quantum_s=1.0)
    cal.add(0.0, 1.0, 1e300)  # a start 1e300 s after a 1 s p90
    assert cal.widen(10.0, 1e300)[1] is None or math.isfinite(cal.widen(10.0, 1e300)[1] or 0.0)


def test_each_group_is_widened_by_its_own_misses_once_it_has_enough() -> None:
    # estimates the simulation reached miss by minutes, those on the profile by a day
    cal = IntervalCalibration(min_scores=20, quantum_s=60.0, step=0.0)
    for k in range(19):
        cal.add(3600.0, 7200.0, 7200.0 + 600.0 * (k % 5), group="simulated")
    wide = cal.widen(3600.0, 7200.0, "simulated")
    assert cal.describe("simulated")["group"] == "all"  # too few of its own yet
    for k in range(60):
        cal.add(3600.0, 7200.0, 86400.0 * (1 + k % 3), group="profile")
    near, far = cal.widen(3600.0, 7200.0, "simulated"), cal.widen(3600.0, 7200.0, "profile")
    assert cal.describe("profile")["group"] == "profile"
    assert cal.describe("simulated")["group"] == "all"  # 19: still the pool
    cal.add(3600.0, 7200.0, 7200.0, group="simulated")  # the 20th
    own = cal.widen(3600.0, 7200.0, "simulated")
    assert cal.describe("simulated")["group"] == "simulated"
    assert (own[1] or 0.0) < 2 * 7200.0 < (far[1] or 0.0) and (near[1] or 0.0) > (own[1] or 0.0)
    assert wide[1] is not None and wide[1] < 2 * 7200.0


def test_the_daemon_calibrates_profile_estimates_apart() -> None:
    est = StartEstimator("default", config=EstimateConfig(cycle_s=0.0, max_events=1, samples=0),
                         calibration=IntervalCalibration(min_scores=1, quantum_s=1.0))
    est.calibration.add(0.0, 10.0, 1e5, group="profile")  # profile estimates: far too early
    est.calibration.add(0.0, 10.0, 10.0, group="simulated")
    rows = est.refresh(snap([gang(req("a", 16), WHOLE, start=0.0)], [req("b", 8)]))
    b = rows["b"]  # max_events=1: the simulation stops at once, the profile places b
    assert "GPU-count profile" in b["note"] and b["interval"]["group"] == "profile"
    assert b["p90_s"] > 1e4 and "of profile estimates" in render_estimate(b)
    assert est.calibration._open["b"][0].group == "profile"
