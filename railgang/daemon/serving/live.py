"""The serving step in the daemon: settings, demand files, the step each cycle (issue 19).

``[serving]`` in the daemon's settings declares the deployments' pools (``pools``: deployment ->
Slurm host list) and two demand files in the demand CSV format (``model.py``):

- ``demand_file``: the demand observed: replicas needed from each time on. The live source is
  Prometheus (``railgang serving fetch`` writes this file from a range query).
- ``forecast_file``: the forecast's mean over the coming hours, in the same format (``""``: the
  demand file itself, i.e. a forecast that holds). The planner keeps ``forecast + buffer_replicas``
  warm, ``switch_in_s`` (from the file) plus ``margin_s`` ahead.

With ``forecast = "fit"`` the daemon fits its own forecast from ``demand_file``'s history up to
now (``autofit.py``: buffer = a quantile of its day-ahead error, at least ``buffer_replicas``;
the whole pool is kept until the first fit is ready).

Times in the files are seconds from ``origin`` (epoch seconds) scaled by ``time_scale`` (file
seconds per wall second; 240 runs a day in six minutes, as the end-to-end test does). A file
that changed is read again; one that became unreadable keeps the last good reading and is
logged once per change (a cycle never fails on it).

The files are read off the cycle's thread (issue 38 row 4: a 100 MB file read in the cycle left
the heartbeat 175 s old, and leases lapsed): each cycle hands the look at the file (``stat``, and
a read when it changed) to a daemon thread and waits at most ``READ_WAIT_S`` for it; the cycle
goes on with the last good reading otherwise, and takes the new one at a later cycle. A read is
bounded by ``model.py``'s ``DAEMON_*`` (the configured deployments only, rows and bytes) and by
``READ_TIMEOUT_S``, past which the parse gives up; a read stuck in the kernel (a stalled file
system) cannot be stopped, so the cycle stops waiting for it with one warning naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_for
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.pipeline import Pipeline
from railgang.daemon.serving.autofit import ForecastFitter
from railgang.daemon.serving.config import ServingSettings
from railgang.daemon.serving.controller import (
    MAX_HORIZON_STEPS,
    Declared,
    Outlook,
    ServingControl,
    ServingFacts,
    ServingStep,
    Status,
    StepConfig,
    serving_step,
)
from railgang.daemon.serving.model import (
    DAEMON_DEMAND_MAX_BYTES,
    DAEMON_MAX_ROWS,
    ServingSet,
    read_demand,
)
from railgang.db.repositories.explanations import ExplanationRow
from railgang.errors import ConfigError, InputError

log = logging.getLogger(__name__)
NOT_NEEDED = "serving_not_needed"  # explain's reason code of a replica the forecast holds back
READ_WAIT_S = 0.5  # the most a cycle waits for a demand file's new reading (module docstring)
READ_TIMEOUT_S = 20.0  # a read not done after this long is given up (a third of the heartbeat's 60 s)
_GONE = (-1, -1)  # the stamp of a file that cannot be stat'ed


def _hosts(expr: str, what: str) -> tuple[str, ...]:
    # strict and bounded: a huge range is refused before it is expanded
    from railgang.topology.conf import expand_hosts

    try:
        return expand_hosts(expr)
    except ValueError as exc:
        raise ConfigError(f"serving.pools.{what}: {exc}") from exc


class _File:
    """A demand file of the deployments ``only``, read again when it changes, off the caller's
    thread (module docstring); the last good reading survives a bad, slow or stuck one."""

    def __init__(self, path: Path, only: Collection[str]) -> None:
        self.path, self.only = path, frozenset(only)
        try:  # before the read: a change during it is seen at the next look
            self.stamp = self._stamp()
        except OSError:
            self.stamp = _GONE  # the read says what is wrong, naming the file
        self.value = self._read(require=False)  # at start, in the caller's thread: bounded alike
        self._task: Future[ServingSet | None] | None = None
        self._since = 0.0  # when the task in flight began (monotonic)
        self._warned = False  # the task in flight was reported stuck

    def _stamp(self) -> tuple[int, int]:
        st = self.path.stat()
        return st.st_mtime_ns, st.st_size

    def _read(self, *, require: bool = True) -> ServingSet:
        got = read_demand(self.path, only=self.only, max_bytes=DAEMON_DEMAND_MAX_BYTES,
                          max_rows=DAEMON_MAX_ROWS, timeout_s=READ_TIMEOUT_S, whole=True)
        missing = sorted(self.only - set(got.demand)) if require else []
        if missing:  # a deployment gone from the file: the last reading is the safer one
            raise InputError(f"no rows of {', '.join(missing)}", path=str(self.path))
        return got

    def _look(self) -> ServingSet | None:
        """The new reading, or None when the file did not change (in the worker thread: one at a
        time, so the stamp is the worker's alone)."""
        try:
            stamp = self._stamp()
        except OSError:
            if self.stamp == _GONE:  # already reported
                return None
            stamp = _GONE
        if stamp == self.stamp:
            return None
        self.stamp = stamp  # a bad file is reported once, not every cycle
        return self._read()

    def _start(self) -> Future[ServingSet | None]:
        """``_look`` in a daemon thread: a stopping daemon never waits for a stuck read."""
        fut: Future[ServingSet | None] = Future()

        def run() -> None:
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(self._look())
                except BaseException as exc:  # handed to get(), which logs it
                    fut.set_exception(exc)

        threading.Thread(target=run, name="serving-read", daemon=True).start()
        return fut

    def get(self) -> ServingSet:
        """The last good reading, after at most ``READ_WAIT_S`` for a new one."""
        if self._task is None:
            self._task, self._since, self._warned = self._start(), time.monotonic(), False
        task = self._task
        wait_for([task], timeout=READ_WAIT_S)
        if not task.done():
            late = time.monotonic() - self._since
            if late > READ_TIMEOUT_S and not self._warned:
                self._warned = True
                log.warning("serving: %s: not read after %g s, keeping its last reading (a "
                            "stalled file system?)", self.path, READ_TIMEOUT_S)
            return self.value
        self._task = None
        try:
            got = task.result()
        except Exception as exc:  # whatever it was, one line and the last reading
            log.warning("serving: %s unreadable, keeping its last reading: %s", self.path,
                        exc if isinstance(exc, (OSError, InputError))
                        else f"{type(exc).__name__}: {exc}")
            return self.value
        if got is not None:
            self.value = got
        return self.value


class LiveServing:
    """The serving step's reader (``read``: the pipeline's facts for ``ServingControl``) and
    keeper of its status after each cycle (``record``: the API, metrics, the status file)."""

    def __init__(self, settings: ServingSettings, clock_now: float,
                 status_file: Path | None = None) -> None:
        if settings.demand_file is None:
            raise ConfigError("serving.demand_file: required when serving.enabled")
        self.s = settings
        self.demand = _File(settings.demand_file, settings.pools)
        self.forecast = (_File(settings.forecast_file, settings.pools) if settings.forecast_file
                         else self.demand)
        deps = {d.name: d for d in self.demand.value.deployments}
        unknown = sorted(set(settings.pools) - set(deps))
        if unknown:
            has = sorted({*deps, *self.demand.value.others})
            raise ConfigError(f"serving.pools: {', '.join(unknown)} not in {settings.demand_file}"
                              f" (it has {', '.join(has) or 'none'})")
        scale = settings.time_scale
        self.declared = tuple(
            Declared(dataclasses.replace(deps[name], switch_in_s=deps[name].switch_in_s / scale),
                     _hosts(expr, name)) for name, expr in sorted(settings.pools.items()))
        seen: dict[str, str] = {}
        for d in self.declared:
            for node in d.nodes:
                other = seen.setdefault(node, d.deployment.name)
                if other != d.deployment.name:
                    raise ConfigError(f"serving.pools: node {node} is in the pools of both "
                                      f"{other} and {d.deployment.name}")
        self.config = StepConfig(margin_s=settings.margin_s, drain_grace_s=settings.drain_grace_s,
                                 lend_rigid=settings.lend_to_rigid)
        self.status: tuple[Status, ...] = ()
        self.unforecast_started = 0  # replicas the reactive path added, summed over cycles
        self.started_at = clock_now
        self.status_file = settings.status_file or status_file
        self._written = ""
        self.fitter: ForecastFitter | None = None
        if settings.forecast == "fit":
            from railgang.daemon.serving.forecast import ForecastConfig

            self.fitter = ForecastFitter(
                ForecastConfig(step_s=settings.fit_sample_s, holdout_days=settings.fit_holdout_days,
                               buffer_quantile=settings.buffer_quantile),
                refit_s=settings.refit_s,
                # file seconds: the outlook's horizon, from a fit up to refit_s old
                horizon_s=settings.horizon_s * scale + settings.refit_s + max(
                    (d.deployment.switch_in_s * scale for d in self.declared), default=0.0))

    def outlooks(self, now: float) -> dict[str, Outlook]:
        s = self.s
        t = (now - s.origin) * s.time_scale  # file seconds
        steps = min(MAX_HORIZON_STEPS, int(s.horizon_s / s.step_s) + 1)
        demand = self.demand.get().demand
        forecast = demand if self.forecast is self.demand else self.forecast.get().demand
        out = {}
        for d in self.declared:
            name = d.deployment.name
            seen = demand.get(name)
            times = [t + k * s.step_s * s.time_scale for k in range(steps)]
            if self.fitter is not None:
                fitted = self.fitter.get(seen, t) if seen is not None else None
                if fitted is None:  # nothing known yet: the pool stays whole, nothing is lent
                    upper = [float(d.deployment.max_replicas)] * steps
                else:
                    buffer = max(s.buffer_replicas, fitted.buffer)
                    upper = [fitted.at(x) + buffer for x in times]
            else:
                fc = forecast.get(name, seen)
                upper = [fc.at(x) + s.buffer_replicas for x in times] if fc is not None else []
            out[name] = Outlook(seen.at(t) if seen is not None else 0, upper, s.step_s)
        return out

    def close(self) -> None:
        if self.fitter is not None:
            self.fitter.close()

    def forecasts(self) -> dict[str, dict[str, Any]]:
        """The fitted forecasts (``forecast = "fit"``) for the API: when, buffer, error."""
        if self.fitter is None:
            return {}
        out: dict[str, dict[str, Any]] = {}
        for d in self.declared:
            name = d.deployment.name
            f = self.fitter.fitted.get(name)
            bt = f.backtest if f is not None else None
            out[name] = {
                "fitted_until_s": None if f is None else f.made_at,
                "buffer": None if f is None else f.buffer,
                "mae": None if bt is None else bt.mae, "bias": None if bt is None else bt.bias,
                "coverage": None if bt is None else bt.coverage,
                "error": self.fitter.errors.get(name)}
        return out

    def read(self, now: float) -> ServingFacts:
        """The facts of this cycle's serving step (``pipeline.Pipeline``'s reader)."""
        return ServingFacts(self.declared, self.outlooks(now), self.config)

    def step(self, snapshot: Snapshot) -> ServingStep:
        """One serving step outside a cycle (tests, a look at the files): read, decide, record."""
        out = serving_step(snapshot, self.declared, self.outlooks(snapshot.now), self.config)
        self.record(out.status, snapshot.now)
        return out

    def pipeline(self) -> Pipeline:
        """The serving step alone in a pipeline, read by this reader (a service built without
        the settings; the daemon's is ``cycle_settings.pipeline_from``'s)."""
        return Pipeline([ServingControl()], readers={"serving": self.read})

    def record(self, status: Sequence[Status], now: float) -> None:
        """The statuses the serving step left (its memory), after a cycle."""
        before = {st.deployment: st.unforecast for st in self.status}
        for st in status:  # a surge counts once, by the replicas it added
            self.unforecast_started += max(0, st.unforecast - before.get(st.deployment, 0))
        self.status = tuple(status)
        self._write(now)

    def as_dict(self, now: float) -> dict[str, Any]:
        """What the API shows (``GET /v1/serving``): each deployment after the last step."""
        deps = {d.deployment.name: d for d in self.declared}
        fits = self.forecasts()
        return {"as_of": now, "unforecast_started": self.unforecast_started,
                "forecast": self.s.forecast, "fits": fits, "deployments": [
            {"deployment": st.deployment, "tp": deps[st.deployment].deployment.tp,
             "min_replicas": deps[st.deployment].deployment.min_replicas,
             "max_replicas": deps[st.deployment].deployment.max_replicas,
             "switch_in_s": deps[st.deployment].deployment.switch_in_s,
             "pool": list(deps[st.deployment].nodes), "target": st.target, "want": st.want,
             "unforecast": st.unforecast, "running": st.running, "released": st.released,
             "queued": st.queued, "drained": list(st.drained), "held_nodes": list(st.held_nodes),
             "lent": dict(st.lent)} for st in self.status]}

    def _write(self, now: float) -> None:
        if self.status_file is None:
            return
        body = self.as_dict(now)
        key = json.dumps({**body, "as_of": None}, sort_keys=True)
        if key == self._written:
            return
        try:  # atomically: a reader never sees half a file
            tmp = self.status_file.with_name(self.status_file.name + ".tmp")
            tmp.write_text(json.dumps(body, sort_keys=True))
            os.replace(tmp, self.status_file)
            self._written = key
        except OSError as exc:
            log.warning("serving: status not written to %s: %s", self.status_file, exc)

    def explain_rows(self) -> list[ExplanationRow]:
        """Rows for ``railgang explain`` of the replicas kept out of the core's sight (the core
        gives them no reason: it never saw them)."""
        rows = []
        for st in self.status:
            when = ("" if st.more_at is None else "; the forecast wants more from "
                    + datetime.fromtimestamp(st.more_at, UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
            detail = (f"deployment {st.deployment}: the forecast holds {st.want} replica(s) "
                      f"now, {st.running} running{when}")
            for j in st.queued_jobs:
                data: dict[str, Any] = {"serving": st.deployment, "serving_more_at": st.more_at,
                        "needed": j.min_gpus, "ahead": 0, "blocked_by": []}
                rows.append(ExplanationRow(
                    job_id=j.job_id, state="waiting", account=j.account,
                    priority_class=int(j.priority_class), gpus=j.gpus, reason=NOT_NEEDED,
                    detail=detail, data=json.dumps(data, sort_keys=True, separators=(",", ":"))))
        return rows

    def lent_until(self, assignment: Mapping[str, object]) -> dict[str, float | None]:
        """The lent nodes among ``assignment``'s and when each is expected back."""
        lent = {n: t for st in self.status for n, t in st.lent.items()}
        return {n: lent[n] for n in sorted(assignment) if n in lent}


__all__ = ["LiveServing"]
