"""The seasonal forecast: it learns a day and a week, its interval covers about what it says,
its buffer grows with the noise, and the command shows the error on held-back days."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.serving.cli import serving_app
from railgang.daemon.serving.forecast import ForecastConfig, backtest, day_ahead
from railgang.daemon.serving.synth import DemandShape, demand_series, write_csv
from railgang.errors import InputError

CONFIG = ForecastConfig(step_s=1800.0, holdout_days=2)


def series(noise: float, seed: int = 0, days: int = 10) -> list[int]:
    return demand_series(DemandShape(low=10, peak=60, weekend=0.5, noise=noise), days, 1800.0,
                         seed=seed)


def test_noiseless_curve_is_learned() -> None:
    bt = backtest(series(0.0), CONFIG)
    assert bt.mae < 3.0  # of a 10-60 replica curve
    assert abs(bt.bias) < 1.5


def test_weekly_season_is_learned() -> None:
    # fit on Mon..Fri + Sat of week 1 and the whole of week 2's weekdays: Saturday forecast must
    # sit well below the weekday peak (weekend = 0.5)
    s = series(0.0, days=13)
    _, fcs = day_ahead(s, 12, CONFIG)
    weekday_peak = max(s[:48])
    assert max(fcs[0].mean) < 0.8 * weekday_peak


def test_buffer_is_a_quantile_of_the_error_and_grows_with_noise() -> None:
    calm, noisy = backtest(series(0.02, 1), CONFIG), backtest(series(0.15, 1), CONFIG)
    assert noisy.buffer > calm.buffer > 0
    assert noisy.mae > calm.mae
    errors = sorted(noisy.errors)
    assert errors[int(0.985 * len(errors))] <= noisy.buffer <= errors[-1]
    assert 0.7 <= noisy.coverage <= 1.0  # a 95 % interval, measured on 96 held-back steps


def test_too_little_history_is_an_error() -> None:
    with pytest.raises(InputError, match="whole days"):
        backtest(series(0.0, days=3), CONFIG)


def test_forecast_command_shows_held_back_error(tmp_path: Path) -> None:
    path = tmp_path / "demand.csv"
    write_csv(path, [("chat", 8, 900.0, series(0.05))], 1800.0)
    res = CliRunner().invoke(serving_app, ["forecast", str(path), "--step-s", "1800", "--json"])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)["deployments"][0]
    assert row["deployment"] == "chat" and row["holdout_days"] == 2
    assert row["buffer_gpus"] == pytest.approx(row["buffer_replicas"] * 8, abs=0.1)
    assert row["mae_replicas"] > 0
    shown = CliRunner().invoke(serving_app, ["show", str(path)])
    assert shown.exit_code == 0 and "chat" in shown.stdout
    bad = CliRunner().invoke(serving_app, ["forecast", str(path), "--deployment", "nope"])
    assert bad.exit_code != 0


def test_plan_command_prints_the_schedule(tmp_path: Path) -> None:
    path = tmp_path / "demand.csv"
    write_csv(path, [("chat", 8, 900.0, series(0.0, days=5))], 1800.0)
    args = ["plan", str(path), "--history-days", "3", "--mode", "reactive", "--buffer-gpus", "8"]
    res = CliRunner().invoke(serving_app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["buffers_replicas"] == {"chat": 1.0} and got["mode"] == "reactive"
    lent = [c["lent_gpus"] for c in got["schedule"]]
    assert max(lent) > min(lent) >= 0  # lent at night, taken back by day
    text = CliRunner().invoke(serving_app, [*args, "--changes", "2"])
    assert text.exit_code == 0 and "more changes" in text.stdout and "day 3 00:00" in text.stdout
    bad = CliRunner().invoke(serving_app, [*args[:-4], "--mode", "static,forecast"])
    assert bad.exit_code != 0
