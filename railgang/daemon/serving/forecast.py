"""Forecast a deployment's demand with daily and weekly seasonality (issue 19, item 2).

The model is statsmodels' SARIMAX as a *dynamic harmonic regression*: a constant, Fourier terms
of the day and of the week as regressors (``daily_harmonics`` and ``weekly_harmonics`` sine/cosine
pairs), and AR(1) errors. Why not Holt-Winters or a seasonal ARIMA: Holt-Winters takes one season
only, and a seasonal ARIMA with a 672-step weekly season (15-minute steps) has a state far too big
to fit in a cycle; Fourier terms carry both seasons in a handful of coefficients and fit in well
under a second on two weeks of 15-minute samples.

Forecasts are made *day-ahead*: at each midnight the model, fitted once on the history, takes in
the day just observed (``append(..., refit=False)``: the fit is kept, the state is updated) and
forecasts the next day with its prediction interval. The held-back days of :func:`backtest` are
forecast the same way, so the error it shows is the error the planner will live with.

The *safety buffer* is a quantile of that error (actual minus forecast, in replicas) on held-back
days, not a constant: the planner keeps ``forecast + buffer`` replicas warm.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from railgang.errors import InputError

DAY_S = 86400.0
WEEK_S = 7 * DAY_S


@dataclass(frozen=True, slots=True)
class ForecastConfig:
    step_s: float = 900.0  # sample spacing of the demand series the model sees
    daily_harmonics: int = 8  # sine/cosine pairs of the day (K in a Fourier series; the
    # morning ramp is steep: 8 halve the held-back error of 4 on the synthetic human curve)
    weekly_harmonics: int = 3  # sine/cosine pairs of the week
    alpha: float = 0.05  # the prediction interval is 1 - alpha
    buffer_quantile: float = 0.99  # quantile of the held-back error kept warm as a buffer
    holdout_days: int = 2  # days held back from the fit to measure the error on

    @property
    def per_day(self) -> int:
        return round(DAY_S / self.step_s)


@dataclass(frozen=True, slots=True)
class Forecast:
    """Replicas forecast from ``start_s`` on, one value per ``step_s``."""

    start_s: float
    step_s: float
    mean: tuple[float, ...]
    lower: tuple[float, ...]  # the model's prediction interval (1 - alpha)
    upper: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Backtest:
    """Day-ahead error on held-back days (actual - forecast, replicas per step)."""

    days: int
    mae: float  # mean absolute error, replicas
    bias: float  # mean error: > 0 means the forecast runs low
    coverage: float  # share of held-back steps inside the prediction interval
    buffer: float  # the buffer_quantile of the error (>= 0), replicas
    errors: tuple[float, ...]


def fourier(index: np.ndarray, step_s: float, config: ForecastConfig) -> np.ndarray:
    """Regressors at sample ``index`` (0 = time 0 of the series): day and week harmonics."""
    t = np.asarray(index, dtype=float) * step_s
    cols = []
    for period, k_max in ((DAY_S, config.daily_harmonics), (WEEK_S, config.weekly_harmonics)):
        for k in range(1, k_max + 1):
            angle = 2 * math.pi * k * t / period
            cols += [np.sin(angle), np.cos(angle)]
    return np.column_stack(cols) if cols else np.zeros((len(t), 0))


class SeasonalModel:
    """A fitted harmonic regression over samples ``start .. start+n-1`` of a series (sample 0 is
    time 0, where the day and the week begin); :meth:`observe` takes in later samples without
    refitting, :meth:`predict` forecasts the next ones."""

    def __init__(self, history: Sequence[float], config: ForecastConfig, start: int = 0) -> None:
        from statsmodels.tsa.statespace.sarimax import SARIMAX  # ~1 s to import: only when used

        if len(history) < 2 * config.per_day:
            raise InputError(f"forecast needs at least two days of history "
                             f"({2 * config.per_day} samples of {config.step_s:g} s), got "
                             f"{len(history)}")
        self.config = config
        y = np.asarray(history, dtype=float)
        exog = fourier(np.arange(start, start + len(y)), config.step_s, config)
        with warnings.catch_warnings():  # convergence chatter; the backtest judges the fit
            warnings.simplefilter("ignore")
            model = SARIMAX(y, exog=exog, order=(1, 0, 0), trend="c")
            self.result: Any = model.fit(disp=False, maxiter=200)
        self.n = start + len(y)

    def observe(self, values: Sequence[float]) -> None:
        """Take in the samples that follow the ones seen so far (the fit is kept)."""
        if not len(values):
            return
        exog = fourier(np.arange(self.n, self.n + len(values)), self.config.step_s, self.config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.result = self.result.append(np.asarray(values, dtype=float), exog=exog,
                                             refit=False)
        self.n += len(values)

    def predict(self, steps: int) -> Forecast:
        """The next ``steps`` samples: mean and the 1 - alpha prediction interval (>= 0)."""
        exog = fourier(np.arange(self.n, self.n + steps), self.config.step_s, self.config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fc = self.result.get_forecast(steps=steps, exog=exog)
            band = np.asarray(fc.conf_int(alpha=self.config.alpha))
        mean = np.clip(np.asarray(fc.predicted_mean, dtype=float), 0, None)
        lo, hi = np.clip(band[:, 0], 0, None), np.clip(band[:, 1], 0, None)
        return Forecast(self.n * self.config.step_s, self.config.step_s, tuple(mean.tolist()),
                        tuple(lo.tolist()), tuple(hi.tolist()))


def day_ahead(series: Sequence[float], fit_days: int, config: ForecastConfig,
              extra_steps: int = 0, start: int = 0) -> tuple[SeasonalModel, list[Forecast]]:
    """Fit on the first ``fit_days`` days, then forecast each later day at its midnight (plus
    ``extra_steps`` past it, for a planner that looks beyond midnight) after observing the
    days before it. One forecast per remaining day of ``series`` (which begins at sample
    ``start``, a midnight)."""
    per_day = config.per_day
    model = SeasonalModel(series[: fit_days * per_day], config, start)
    out = []
    day = fit_days
    while day * per_day < len(series):
        out.append(model.predict(per_day + extra_steps))
        model.observe(series[day * per_day: (day + 1) * per_day])
        day += 1
    return model, out


def backtest(series: Sequence[float], config: ForecastConfig, start: int = 0) -> Backtest:
    """Hold back the last ``holdout_days`` whole days, forecast them day-ahead, and measure
    (``series`` begins at sample ``start``, a midnight)."""
    per_day = config.per_day
    days = len(series) // per_day
    if config.holdout_days < 1 or days - config.holdout_days < 2:
        raise InputError(f"a backtest holding back {config.holdout_days} day(s) needs at least "
                         f"{config.holdout_days + 2} whole days of history, got {days}")
    fit_days = days - config.holdout_days
    _, forecasts = day_ahead(series[: days * per_day], fit_days, config, start=start)
    errors, inside = [], 0
    for d, fc in enumerate(forecasts):
        actual = series[(fit_days + d) * per_day: (fit_days + d + 1) * per_day]
        for a, m, lo, hi in zip(actual, fc.mean, fc.lower, fc.upper, strict=False):
            errors.append(float(a) - m)
            inside += lo <= a <= hi
    err = np.asarray(errors)
    return Backtest(days=config.holdout_days, mae=float(np.mean(np.abs(err))),
                    bias=float(np.mean(err)), coverage=inside / len(err),
                    buffer=max(0.0, float(np.quantile(err, config.buffer_quantile))),
                    errors=tuple(errors))


__all__ = ["Backtest", "Forecast", "ForecastConfig", "SeasonalModel", "backtest", "day_ahead",
           "fourier"]
