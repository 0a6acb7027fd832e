"""serving/autofit.py: the daemon fits its own forecast from the history up to now, its buffer is
the held-back error's quantile, it refits on schedule without stalling a cycle, and it lends
nothing until it knows something."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from railgang.daemon.serving.autofit import Fitted, ForecastFitter, fit_demand
from railgang.daemon.serving.config import ServingSettings
from railgang.daemon.serving.forecast import ForecastConfig, backtest
from railgang.daemon.serving.live import LiveServing
from railgang.daemon.serving.model import read_demand
from railgang.daemon.serving.synth import DemandShape, demand_series, write_csv

DAY = 86400.0
STEP = 1800.0
CONFIG = ForecastConfig(step_s=STEP, holdout_days=2)
SHAPE = DemandShape(low=2, peak=12, weekend=0.5, noise=0.05)


def demand_file(tmp_path: Path, days: int = 10) -> Path:
    path = tmp_path / "demand.csv"
    write_csv(path, [("chat", 8, 900.0, demand_series(SHAPE, days, STEP, seed=3))], STEP,
              max_replicas={"chat": 16})
    return path


def at_once(work: Callable[[], Fitted]) -> Future[Fitted]:
    fut: Future[Fitted] = Future()
    try:
        fut.set_result(work())
    except Exception as exc:  # the fitter's own handling is under test
        fut.set_exception(exc)
    return fut


def counted_fitter() -> tuple[ForecastFitter, list[int]]:
    """A fitter that fits at once and counts its fits."""
    runs: list[int] = []

    def counting(work: Callable[[], Fitted]) -> Future[Fitted]:
        runs.append(1)
        return at_once(work)

    return ForecastFitter(CONFIG, refit_s=DAY, horizon_s=DAY, run=counting), runs


def test_the_fit_reads_the_history_up_to_now_only(tmp_path: Path) -> None:
    full = read_demand(demand_file(tmp_path, days=10)).demand["chat"]
    cut = read_demand(demand_file(tmp_path / "..", days=8)).demand["chat"]  # the same 8 days
    now = 8 * DAY
    a, b = fit_demand(full, now, CONFIG, DAY), fit_demand(cut, now, CONFIG, DAY)
    assert a.forecast.mean == pytest.approx(b.forecast.mean)  # day 9 of the file is not seen
    assert a.made_at == now and a.forecast.start_s == now
    history = full.sampled(STEP, 0.0, now)
    assert a.buffer == pytest.approx(backtest(history, CONFIG).buffer) and a.buffer > 0
    actual = full.sampled(STEP, now, now + DAY)
    err = [abs(x - a.at(now + k * STEP)) for k, x in enumerate(actual)]
    assert sum(err) / len(err) < 1.5  # of a 2-12 replica day


def test_a_fit_is_kept_until_it_is_refit_s_old(tmp_path: Path) -> None:
    chat = read_demand(demand_file(tmp_path)).demand["chat"]
    fitter, runs = counted_fitter()
    first = fitter.get(chat, 7 * DAY)
    assert first is not None and len(runs) == 1
    assert fitter.get(chat, 7 * DAY + 3600) is first and len(runs) == 1
    again = fitter.get(chat, 8 * DAY)
    assert again is not None and again.made_at == 8 * DAY and len(runs) == 2


def test_too_little_history_is_one_line_and_not_retried_every_cycle(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    chat = read_demand(demand_file(tmp_path)).demand["chat"]
    fitter, runs = counted_fitter()
    assert fitter.get(chat, 1.5 * DAY) is None
    assert fitter.get(chat, 1.5 * DAY + 600) is None and len(runs) == 1
    assert "two days of history" in fitter.errors["chat"]
    assert "forecast of chat not fitted" in caplog.text
    assert fitter.get(chat, 2.5 * DAY + 600) is not None  # a day later: enough, no buffer yet
    assert fitter.fitted["chat"].backtest is None and "chat" not in fitter.errors


def settings(path: Path, **kw: object) -> ServingSettings:
    return ServingSettings(enabled=True, demand_file=path, pools={"chat": "n[001-016]"},
                           forecast="fit", fit_sample_s=STEP, step_s=600.0, horizon_s=6 * 3600,
                           **kw)  # type: ignore[arg-type]


def test_the_daemon_keeps_the_pool_whole_until_its_first_fit_then_lends_by_it(tmp_path: Path) -> None:
    live = LiveServing(settings(demand_file(tmp_path)), 0.0)
    assert live.fitter is not None
    night = 8 * DAY + 3 * 3600  # 03:00 of day 9: the trough
    before = live.outlooks(night)["chat"]
    assert set(before.upper) == {16.0}  # max_replicas: nothing lent before a forecast exists
    fut = live.fitter._pending["chat"]  # the background fit the first call started
    fut.result(timeout=120)
    after = live.outlooks(night)["chat"]
    fitted = live.fitter.fitted["chat"]
    assert after.upper[0] == pytest.approx(fitted.at(night) + fitted.buffer)
    assert max(after.upper[:6]) < 8  # the night needs few replicas: the rest can be lent
    api = live.as_dict(night)
    assert api["forecast"] == "fit" and api["fits"]["chat"]["buffer"] == pytest.approx(fitted.buffer)
    assert api["fits"]["chat"]["fitted_until_s"] == 8 * DAY + 3 * 3600
    assert 0 < api["fits"]["chat"]["coverage"] <= 1
    live.fitter.close()


def test_a_configured_buffer_is_a_floor(tmp_path: Path) -> None:
    live = LiveServing(settings(demand_file(tmp_path), buffer_replicas=5.0), 0.0)
    assert live.fitter is not None
    live.fitter._run = at_once  # type: ignore[method-assign]
    night = 8 * DAY + 3 * 3600
    out = live.outlooks(night)["chat"]
    fitted = live.fitter.fitted["chat"]
    assert fitted.buffer < 5.0 and out.upper[0] == pytest.approx(fitted.at(night) + 5.0)


def test_a_demand_file_with_no_past_lends_nothing(tmp_path: Path) -> None:
    path = tmp_path / "future.csv"
    path.write_text("time_s,deployment,replicas,tp,switch_in_s,max_replicas\n"
                    "864000,chat,3,8,900,16\n")
    live = LiveServing(settings(path), 0.0)
    assert live.fitter is not None
    live.fitter._run = at_once  # type: ignore[method-assign]
    assert set(live.outlooks(3 * DAY)["chat"].upper) == {16.0}
    assert "history" in live.as_dict(3 * DAY)["fits"]["chat"]["error"]


def test_a_history_that_begins_later_keeps_the_day_and_the_week_in_phase(tmp_path: Path) -> None:
    values = demand_series(SHAPE, 10, STEP, seed=3)
    per_day = int(DAY / STEP)
    path = tmp_path / "late.csv"
    rows = ["time_s,deployment,replicas,tp,switch_in_s,max_replicas"]
    rows += [f"{(2 * per_day + k) * STEP:g},chat,{v},8,900,16"
             for k, v in enumerate(values[2 * per_day:])]  # the file begins on day 3
    path.write_text("\n".join(rows) + "\n")
    late = read_demand(path).demand["chat"]
    now = 8 * DAY
    fitted = fit_demand(late, now, CONFIG, DAY)
    assert fitted.backtest is not None  # six days: four fitted, two held back
    actual = values[8 * per_day: 9 * per_day]
    err = [abs(x - fitted.at(now + k * STEP)) for k, x in enumerate(actual)]
    assert sum(err) / len(err) < 1.5


def test_a_long_history_is_cut_to_the_last_four_weeks(tmp_path: Path) -> None:
    from railgang.daemon.serving.autofit import MAX_HISTORY_DAYS

    path = tmp_path / "long.csv"
    write_csv(path, [("chat", 8, 900.0, demand_series(SHAPE, 60, STEP, seed=3))], STEP)
    chat = read_demand(path).demand["chat"]
    fitted = fit_demand(chat, 60 * DAY, CONFIG, DAY)
    assert fitted.backtest is not None and fitted.made_at == 60 * DAY and MAX_HISTORY_DAYS == 28
    tail = tmp_path / "tail.csv"  # the file holding only those 28 days (rows from day 32 on)
    values = demand_series(SHAPE, 60, STEP, seed=3)
    per_day = int(DAY / STEP)
    rows = ["time_s,deployment,replicas,tp,switch_in_s,max_replicas"]
    rows += [f"{(32 * per_day + k) * STEP:g},chat,{v},8,900,"
             for k, v in enumerate(values[32 * per_day:])]
    tail.write_text("\n".join(rows) + "\n")
    short = fit_demand(read_demand(tail).demand["chat"], 60 * DAY, CONFIG, DAY)
    assert short.forecast.mean == pytest.approx(fitted.forecast.mean)


def test_an_unexpected_failure_inside_a_fit_is_one_line_not_a_failed_cycle(tmp_path: Path) -> None:
    chat = read_demand(demand_file(tmp_path)).demand["chat"]

    def broken(work: Callable[[], Fitted]) -> Future[Fitted]:
        fut: Future[Fitted] = Future()
        fut.set_exception(IndexError("inside statsmodels"))
        return fut

    fitter = ForecastFitter(CONFIG, refit_s=DAY, horizon_s=DAY, run=broken)
    assert fitter.get(chat, 8 * DAY) is None
    assert fitter.errors["chat"] == "IndexError: inside statsmodels"
