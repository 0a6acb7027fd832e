"""The daemon fits its own forecast (issue 19 item 2): ``[serving] forecast = "fit"``.

From the demand history it is given (``demand_file``; ``railgang serving fetch`` writes it from
Prometheus), only the part up to *now* (a file that also holds the future is not read past now),
each deployment's model (``forecast.py``: daily and weekly harmonics, AR(1) errors) is fitted,
its error measured day-ahead on held-back days, and the forecast of the next ``horizon`` used
with a **buffer that is a quantile of that error** (``backtest``), at least ``buffer_replicas``.
It is fitted again every ``refit_s`` (file seconds; a day by default: the day just seen joins the
fit).

A fit takes seconds (statsmodels; the backtest fits a second model), longer than a cycle may
stall: it runs in a background daemon thread and the cycle uses the last finished fit. Until the first
one is ready, or when the history is too short (two days, plus the held-back days for the
buffer), the daemon lends nothing: the deployment keeps its whole pool (``max_replicas``), the
safe side when nothing is known. A fit that fails is logged with the deployment's name and tried
again after ``refit_s``; the last good fit stays in use.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from railgang.daemon.serving.forecast import (
    DAY_S,
    Backtest,
    Forecast,
    ForecastConfig,
    SeasonalModel,
    backtest,
)
from railgang.daemon.serving.model import Demand

log = logging.getLogger(__name__)

__all__ = ["MAX_HISTORY_DAYS", "Fitted", "ForecastFitter", "fit_demand"]

MAX_HISTORY_DAYS = 28


@dataclass(frozen=True, slots=True)
class Fitted:
    """One deployment's forecast, made from its history up to ``made_at`` (file seconds)."""

    deployment: str
    made_at: float
    forecast: Forecast  # starts at ``made_at``
    buffer: float  # replicas: the backtest's quantile of the day-ahead error (0 without one)
    backtest: Backtest | None  # None: too little history to hold days back

    def at(self, t: float) -> float:
        """The forecast's mean at file time ``t`` (the last step's value past its end, the
        first's before its start)."""
        mean = self.forecast.mean
        k = math.floor((t - self.forecast.start_s) / self.forecast.step_s)
        return mean[min(max(k, 0), len(mean) - 1)]


def fit_demand(demand: Demand, now: float, config: ForecastConfig, horizon_s: float) -> Fitted:
    """Fit ``demand``'s history before ``now`` (file seconds from time 0) and forecast
    ``horizon_s`` ahead. Raises InputError when the history is too short to fit."""
    n = math.floor(now / config.step_s)
    # the history begins at the first midnight with a row at or before it: before its first
    # row a file knows nothing (its "0 before the first point" is not an observation)
    first = demand.points[0][0] if demand.points else math.inf
    start = math.ceil(first / DAY_S) * config.per_day if math.isfinite(first) else n
    # at most the last MAX_HISTORY_DAYS whole days: years of demand would take minutes to fit
    # and say little about next week that four weeks do not
    start = max(start, (n // config.per_day - MAX_HISTORY_DAYS) * config.per_day)
    history = demand.sampled(config.step_s, start * config.step_s, n * config.step_s) \
        if n > start else []
    model = SeasonalModel(history, config, start)
    forecast = model.predict(max(1, math.ceil(horizon_s / config.step_s)))
    bt: Backtest | None = None
    if len(history) // config.per_day >= config.holdout_days + 2:
        bt = backtest(history, config, start)
    return Fitted(demand.deployment, n * config.step_s, forecast,
                  bt.buffer if bt is not None else 0.0, bt)


class ForecastFitter:
    """Keeps each deployment's last fit; :meth:`get` never blocks on a new one (one worker
    thread fits them in turn). ``run``: how a fit is carried out (a thread pool in the daemon;
    tests pass one that runs it at once)."""

    def __init__(self, config: ForecastConfig, refit_s: float, horizon_s: float,
                 run: Callable[[Callable[[], Fitted]], Future[Fitted]] | None = None) -> None:
        self.config, self.refit_s, self.horizon_s = config, refit_s, horizon_s
        self._run = run or self._submit
        self._lock = threading.Lock()
        self.fitted: dict[str, Fitted] = {}
        self._pending: dict[str, Future[Fitted]] = {}
        self._tried: dict[str, float] = {}  # file time of the last fit started
        self.errors: dict[str, str] = {}  # the last failed fit's one line, per deployment

    @staticmethod
    def _submit(work: Callable[[], Fitted]) -> Future[Fitted]:
        """Fit in a daemon thread: a stopping daemon never waits for a fit (a pool's worker
        would be joined at exit)."""
        fut: Future[Fitted] = Future()

        def run() -> None:
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(work())
                except BaseException as exc:  # handed to _collect, which logs what it knows
                    fut.set_exception(exc)

        threading.Thread(target=run, name="serving-fit", daemon=True).start()
        return fut

    def get(self, demand: Demand, now: float) -> Fitted | None:
        """The last finished fit of ``demand``'s deployment (None before the first); starts a new
        fit when the last one is ``refit_s`` old and none runs."""
        name = demand.deployment
        with self._lock:
            self._collect(name)
            last = self._tried.get(name)
            due = last is None or now - last >= self.refit_s or now < last
            if due and name not in self._pending:
                self._tried[name] = now
                self._pending[name] = self._run(
                    lambda: fit_demand(demand, now, self.config, self.horizon_s))
                self._collect(name)
            return self.fitted.get(name)

    def _collect(self, name: str) -> None:
        fut = self._pending.get(name)
        if fut is None or not fut.done():
            return
        del self._pending[name]
        try:
            fitted = fut.result()
        except Exception as exc:  # a fit is optional: whatever fails it (statsmodels included)
            # is one line and the last good fit, never a failed cycle
            self.errors[name] = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("serving: forecast of %s not fitted (tried again in %g s): %s", name,
                        self.refit_s, self.errors[name])
            return
        self.errors.pop(name, None)
        self.fitted[name] = fitted
        bt = fitted.backtest
        log.info("serving: forecast of %s fitted on %.1f days: buffer %.2f replicas%s", name,
                 fitted.made_at / 86400.0, fitted.buffer,
                 "" if bt is None else f", day-ahead MAE {bt.mae:.2f}, {bt.coverage:.1%} inside "
                 "the interval on the held-back days")

    def close(self) -> None:
        """Forget the fits still running (their daemon threads end with the process)."""
        with self._lock:
            self._pending.clear()
