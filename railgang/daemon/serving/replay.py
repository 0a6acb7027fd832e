"""Serving demand replayed beside a training trace (``railgang sim --serving``; issue 19 item 4,
issue 34 item 3).

1. **Forecast** each deployment (``expect``): the first ``history_days`` of the demand file are
   history (the forecast is fitted there, and its error on the last ``holdout_days`` of it sets
   the buffer); the window is what follows, forecast day-ahead.
2. **Replay** the training trace through the engine and the core with the daemon's serving step
   (``controller.py``) in the cycle's pipeline (:class:`SimServing`): replicas are class-0 jobs
   the step releases and drains, the pool's nodes it does not need are lent to the core under
   the core's rules (``core/model/serving.py``: class 3 only; a rigid job only when its time
   limit ends before the take-back, unless ``lend_rigid``), and a take-back is the core's own
   eviction for a replica (elastic borrowers shrink first). Nothing here decides.
3. **Report** serving's unmet demand-minutes, late replicas, training's mean JCT, GPU-hours
   gained and lost, and the cluster's utilisation, static (the pool is never lent) vs forecast
   (vs reactive: the demand now, no forecast) (``simulate.py``).

``plan_window`` is the planner alone (``plan.py``: no cluster, no training), for ``railgang serving
plan`` and the buffer sweep.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.job import PriorityClass
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.pipeline import Pipeline, StepOut
from railgang.daemon.serving.config import ServingSettings
from railgang.daemon.serving.controller import (
    MAX_HORIZON_STEPS,
    Declared,
    Outlook,
    ServingControl,
    ServingFacts,
    Status,
    StepConfig,
    nodes_for,
)
from railgang.daemon.serving.forecast import DAY_S, ForecastConfig, backtest, day_ahead
from railgang.daemon.serving.model import Deployment, ServingSet
from railgang.daemon.serving.plan import (
    Mode,
    PlanConfig,
    ServingOutcome,
    Timeline,
    Upper,
    lent_total,
    outcome,
    plan,
)
from railgang.daemon.sim.traces.model import MAX_TRACE_SECONDS, TraceJob
from railgang.errors import ConfigError

MAX_STEPS = 200_000  # plan steps per deployment (~139 days of minutes): a bounded replay
MAX_POOL_GPUS = 100_000  # a serving pool beyond any fleet: refused before nodes are built


_DAEMON = ServingSettings()  # the daemon's defaults: a replay decides as the daemon would


@dataclass(frozen=True, slots=True)
class ServingKnobs:
    history_days: int = 7  # days of the demand file before the simulated window
    step_s: float = _DAEMON.step_s  # plan step; the replay records serving at each
    margin_s: float = _DAEMON.margin_s  # taken back this long before the switch-in alone needs
    forecast: ForecastConfig = field(default_factory=ForecastConfig)
    buffer_gpus: float | None = None  # a fixed buffer instead of the error quantile (chapter)
    drain_grace_s: float = _DAEMON.drain_grace_s  # a drained replica's grace
    lend_rigid: bool = _DAEMON.lend_to_rigid  # rigid class-3 jobs borrow any lent node too
    horizon_s: float = _DAEMON.horizon_s  # how far ahead take-backs are seen

    @classmethod
    def of(cls, settings: ServingSettings, **given: Any) -> ServingKnobs:
        """The knobs the daemon's ``[serving]`` settings set, ``given`` on top."""
        return cls(**{"step_s": settings.step_s, "margin_s": settings.margin_s,
                      "drain_grace_s": settings.drain_grace_s,
                      "lend_rigid": settings.lend_to_rigid, "horizon_s": settings.horizon_s,
                      **given})


@dataclass(frozen=True, slots=True)
class Planned:
    """The plan of every deployment over the window, and how the buffer was chosen."""

    window_s: float
    timelines: tuple[Timeline, ...]
    buffers: dict[str, float]  # replicas, per deployment
    forecast_mae: dict[str, float]  # held-back day-ahead MAE, replicas (empty: fixed buffer)

    @property
    def outcome(self) -> ServingOutcome:
        return outcome(self.timelines)

    @property
    def lent_gpus(self) -> list[int]:
        return lent_total(self.timelines)


def _resample(forecasts: Sequence[Any], fstep: float, step: float, n: int) -> list[float]:
    """Day-ahead forecasts (each one day at ``fstep``) laid end to end at the plan's ``step``."""
    per_day = round(DAY_S / fstep)
    flat = [v for fc in forecasts for v in fc.mean[:per_day]]
    return [flat[min(len(flat) - 1, int(k * step // fstep))] for k in range(n)] if flat else []


@dataclass(frozen=True, slots=True)
class Expected:
    """One deployment's forecast over the window at the plan step, its buffer and its error."""

    values: tuple[float, ...]  # forecast mean per plan step
    buffer: float  # replicas: the error quantile on held-back history days
    mae: float  # held-back day-ahead mean absolute error, replicas


def _bounds(sset: ServingSet, knobs: ServingKnobs) -> tuple[float, float]:
    start = knobs.history_days * DAY_S
    end = max(d.end_s for d in sset.demand.values())
    if end <= start + knobs.step_s:
        raise ConfigError(f"the demand file spans {end / DAY_S:.1f} days: nothing is left after "
                          f"{knobs.history_days} day(s) of history")
    if (end - start) / knobs.step_s > MAX_STEPS:
        raise ConfigError(f"a window of {(end - start) / DAY_S:,.0f} days is more than "
                          f"{MAX_STEPS * knobs.step_s / DAY_S:.0f} days of {knobs.step_s:g} s "
                          "plan steps: cut the demand file")
    return start, end


def expect(sset: ServingSet, knobs: ServingKnobs) -> dict[str, Expected]:
    """Fit, backtest and forecast every deployment (the expensive part: once per file)."""
    start, end = _bounds(sset, knobs)
    fc = knobs.forecast
    out = {}
    for dep in sset.deployments:
        demand = sset.demand[dep.name]
        n = len(demand.sampled(knobs.step_s, start, end))
        series = demand.sampled(fc.step_s, 0.0, end)
        bt = backtest(series[: knobs.history_days * fc.per_day], fc)
        _, days = day_ahead(series, knobs.history_days, fc)
        out[dep.name] = Expected(tuple(_resample(days, fc.step_s, knobs.step_s, n)), bt.buffer,
                                 bt.mae)
    return out


def plan_window(sset: ServingSet, mode: Mode, knobs: ServingKnobs,
                expected: dict[str, Expected] | None = None) -> Planned:
    """Plan every deployment of ``sset`` over the days after its history (``expected``: the
    forecasts, when already made; ``knobs.buffer_gpus`` overrides their buffers)."""
    start, end = _bounds(sset, knobs)
    config = PlanConfig(step_s=knobs.step_s, margin_s=knobs.margin_s, mode=mode)
    fitted = mode == "forecast" or (mode == "reactive" and knobs.buffer_gpus is None)
    if fitted and expected is None:  # a reactive plan with a fixed buffer needs no forecast
        expected = expect(sset, knobs)
    timelines, buffers, maes = [], {}, {}
    for dep in sset.deployments:
        need = sset.demand[dep.name].sampled(knobs.step_s, start, end)
        upper = None
        if mode != "static":
            got = expected[dep.name] if expected is not None else None
            buffers[dep.name] = (knobs.buffer_gpus / dep.tp if knobs.buffer_gpus is not None
                                 else got.buffer if got is not None else 0.0)
            if got is not None:
                maes[dep.name] = got.mae
            upper = Upper(got.values if mode == "forecast" and got is not None else need,
                          buffers[dep.name])
        timelines.append(plan(dep, need, upper, config))
    return Planned(end - start, tuple(timelines), buffers, maes)


class SimServing:
    """The daemon's serving step (``controller.py``) driven by the simulator: a
    ``CapacitySchedule`` for the engine that carries the step in its ``pipeline``.

    Each deployment gets ``max_replicas`` class-0 replica jobs (``TraceJob.serving``), queued at
    the window's start as an operator submits them to Slurm; the step releases as many as the
    target wants, drains the surplus, and lends the rest of the pool, exactly as in the daemon.
    The facts it reads each cycle are the demand observed now and, by mode, the outlook:
    ``static`` the whole pool (nothing lent), ``forecast`` the day-ahead forecast + buffer from
    now to ``horizon_s`` ahead, ``reactive`` the demand now + buffer (no forecast). At every plan
    step (``step_s``) an event makes the engine run a cycle and this records what serving got:
    demand, replicas ready (started ``switch_in_s`` ago, or running since the window opened),
    replicas held, GPUs of the nodes lent, once that step's cycle ran (:meth:`observe`, the
    engine's observer); the report reads those as :class:`plan.Timeline`s. At
    the window's end every replica is drained (the replay's serving stops there).
    """

    def __init__(self, sset: ServingSet, mode: Mode, knobs: ServingKnobs,
                 declared: Sequence[Declared], gpus_per_node: int,
                 expected: dict[str, Expected] | None = None) -> None:
        start, end = _bounds(sset, knobs)
        self.start, self.window_s, self.step_s = start, end - start, knobs.step_s
        self.sset, self.mode, self.knobs, self.gpn = sset, mode, knobs, gpus_per_node
        self.declared = tuple(declared)
        self.expected = expected
        fitted = mode == "forecast" or (mode == "reactive" and knobs.buffer_gpus is None)
        if fitted and expected is None:
            expected = self.expected = expect(sset, knobs)
        self.horizon = max(1, min(MAX_HORIZON_STEPS, int(knobs.horizon_s / knobs.step_s) + 1))
        self.buffers: dict[str, float] = {}
        self.maes: dict[str, float] = {}
        self.values: dict[str, tuple[float, ...]] = {}  # forecast mode: upper per plan step
        for d in self.declared:
            dep = d.deployment
            if mode == "static":
                continue
            got = expected.get(dep.name) if expected is not None else None
            self.buffers[dep.name] = (knobs.buffer_gpus / dep.tp if knobs.buffer_gpus is not None
                                      else got.buffer if got is not None else 0.0)
            if got is not None:
                self.maes[dep.name] = got.mae
            if mode == "forecast" and got is not None and got.values:
                buffer = self.buffers[dep.name]
                # forecast + buffer per plan step, the last one held past the window
                self.values[dep.name] = (tuple(v + buffer for v in got.values)
                                         + (got.values[-1] + buffer,) * self.horizon)
        self.config = StepConfig(margin_s=knobs.margin_s, drain_grace_s=knobs.drain_grace_s,
                                 lend_rigid=knobs.lend_rigid)
        self.ended = False
        self.status: tuple[Status, ...] = ()  # the step's memory after the last cycle
        self.pipeline = Pipeline([_Watched(ServingControl(), self)],
                                 readers={ServingControl.name: self.read})
        self.timelines = {d.deployment.name: Timeline(d.deployment, knobs.step_s, lent=[])
                          for d in self.declared}
        self._unmet = dict.fromkeys(self.timelines, 0)
        self._seen: set[tuple[str, float]] = set()  # (replica, start) already counted
        self._unforecast = dict.fromkeys(self.timelines, 0)
        self._steps = math.ceil(self.window_s / self.step_s)  # plan steps in the window
        self._k = 0  # the next plan step to record

    def replicas(self) -> list[TraceJob]:
        """The replica jobs, queued at the window's start (time 0 of the replay)."""
        work = min(MAX_TRACE_SECONDS, 10 * self.window_s)  # never done inside the window
        return [TraceJob(f"serve-{d.deployment.name}-{i}", 0.0, d.deployment.tp, work,
                         account="serving", tp=d.deployment.tp, dp=1,
                         priority_class=PriorityClass.SERVING, serving=d.deployment.name)
                for d in self.declared
                for i in range(max(d.deployment.max_replicas, d.deployment.min_replicas))]

    def events(self) -> Sequence[tuple[float, str]]:
        return [(k * self.step_s, str(k)) for k in range(self._steps)] + [(self.window_s, "end")]

    def _outlook(self, dep: Deployment, now: float) -> Outlook:
        seen = self.sset.demand[dep.name].at(self.start + now)
        if self.ended:
            return Outlook(0, (), self.step_s)
        cap = max(dep.max_replicas, dep.min_replicas)
        if self.mode == "static":
            return Outlook(seen, (float(cap),), self.step_s)
        values = self.values.get(dep.name)
        if values is None:  # reactive: what is needed now, and the buffer
            return Outlook(seen, (seen + self.buffers.get(dep.name, 0.0),), self.step_s)
        k = min(int(now // self.step_s), len(values) - self.horizon)
        return Outlook(seen, values[k: k + self.horizon], self.step_s)

    def read(self, now: float) -> ServingFacts:
        """The serving step's facts at ``now`` (what ``serving/live.py`` reads in the daemon)."""
        declared = self.declared
        if self.ended:  # the window is over: no replica wanted
            declared = tuple(Declared(dataclasses.replace(d.deployment, min_replicas=0,
                                                          max_replicas=0), d.nodes)
                             for d in declared)
        return ServingFacts(declared, {d.deployment.name: self._outlook(d.deployment, now)
                                       for d in declared}, self.config)

    def apply(self, key: str, backend: Any, now: float) -> bool:
        """A plan step (or the window's end): the engine runs a cycle now."""
        if key == "end":
            self.ended = True
        return True

    def observe(self, now: float, backend: Any) -> None:
        """After a cycle: record each plan step the cycles have reached (the engine's observer)."""
        while self._k < self._steps and self._k * self.step_s <= now:
            self._sample(self._k * self.step_s, backend)
            self._k += 1

    def _sample(self, t: float, backend: Any) -> None:
        lent_nodes = {n for st in self.status for n in st.lent}
        by_dep: dict[str, list[Any]] = {name: [] for name in self.timelines}
        for sj in backend.running.values():
            if sj.tj.serving in by_dep:
                by_dep[sj.tj.serving].append(sj)
        for d in self.declared:
            name, dep = d.deployment.name, d.deployment
            tl = self.timelines[name]
            need = self.sset.demand[name].at(self.start + t)
            running = by_dep[name]
            # warm once switch_in_s has passed since its start; the replicas started as the window
            # opened were running before it (the plan's replicas start warm too)
            ready = sum(1 for sj in running
                        if sj.start_time <= 0.0 or sj.start_time <= t - dep.switch_in_s)
            starts = 0
            for sj in running:
                if (sj.tj.job_id, sj.start_time) not in self._seen:
                    self._seen.add((sj.tj.job_id, sj.start_time))
                    starts += sj.start_time > 0.0
            reactive = min(starts, self._unforecast[name])
            self._unforecast[name] -= reactive
            tl.reactive_starts += reactive
            tl.planned_starts += starts - reactive
            unmet = max(0, need - ready)
            tl.late += max(0, unmet - self._unmet[name])
            self._unmet[name] = unmet
            tl.demand.append(need)
            tl.ready.append(ready)
            tl.held.append(len(running))
            tl.unmet.append(unmet)
            assert tl.lent is not None
            tl.lent.append(sum(self.gpn for n in d.nodes if n in lent_nodes))

    def watched(self, status: tuple[Status, ...]) -> None:
        """The step's statuses after a cycle: replicas the demand now added beyond the forecast
        (the reactive path) are counted when they start."""
        before = {st.deployment: st.unforecast for st in self.status}
        for st in status:
            self._unforecast[st.deployment] = (self._unforecast.get(st.deployment, 0)
                                               + max(0, st.unforecast - before.get(st.deployment, 0)))
        self.status = status

    def planned(self) -> Planned:
        """What serving got, as the report reads a plan."""
        return Planned(self.window_s, tuple(self.timelines.values()), self.buffers, self.maes)


class BusyMeter:
    """The engine's observer: training GPUs held (replicas aside), integrated over
    ``[0, until]``."""

    def __init__(self, until: float) -> None:
        self.until = until
        self.gpu_s = 0.0
        self._t = 0.0
        self._busy = 0

    def __call__(self, now: float, backend: Any) -> None:
        t = min(now, self.until)
        if t > self._t:
            self.gpu_s += self._busy * (t - self._t)
            self._t = t
        self._busy = sum(sj.gpus for sj in backend.running.values() if not sj.tj.serving)

    def close(self) -> float:
        if self._t < self.until:
            self.gpu_s += self._busy * (self.until - self._t)
            self._t = self.until
        return self.gpu_s


class _Watched:
    """The serving step as it is, its statuses handed to the replay's recorder after each run."""

    def __init__(self, inner: ServingControl, sink: SimServing) -> None:
        self.inner, self.sink, self.name = inner, sink, inner.name

    def initial(self) -> tuple[Status, ...]:
        return self.inner.initial()

    def run(self, snapshot: Snapshot, facts: Mapping[str, Any], memory: tuple[Status, ...],
            now: float) -> StepOut:
        out = self.inner.run(snapshot, facts, memory, now)
        self.sink.watched(out.memory)
        return out

    def settle(self, memory: tuple[Status, ...], results: Sequence[ActionResult],
               now: float) -> tuple[Status, ...]:
        return self.inner.settle(memory, results, now)


def pool_nodes(sset: ServingSet, gpus_per_node: int) -> dict[str, int]:
    """Whole nodes each deployment's pool takes: its ``max_replicas`` TP groups
    (``controller.nodes_for``: a group never shares a node's NVLink domain)."""
    if sset.pool_gpus > MAX_POOL_GPUS:  # before a fabric of that many nodes is built
        raise ConfigError(f"a serving pool of {sset.pool_gpus:,} GPUs is more than "
                          f"{MAX_POOL_GPUS:,}")
    return {d.name: nodes_for(d, max(d.max_replicas, d.min_replicas), gpus_per_node)
            for d in sset.deployments}


def declare(fabric: Any, sset: ServingSet) -> list[Declared]:
    """The serving pools: the last nodes of ``fabric``, in the deployments' order."""
    names = list(fabric.nodes)
    counts = pool_nodes(sset, fabric.facts(names[0]).gpus)
    total = sum(counts.values())
    if total >= len(names):
        raise ConfigError(f"the serving pools ({sset.pool_gpus} GPUs, {total} nodes) leave no "
                          f"training nodes of {len(names)}")
    out, at = [], len(names) - total
    for d in sset.deployments:
        out.append(Declared(d, tuple(names[at: at + counts[d.name]])))
        at += counts[d.name]
    return out


def cut_trace(jobs: Sequence[Any], window_s: float) -> list[Any]:
    """Jobs submitted inside the window (the plan says nothing about later)."""
    return [j for j in jobs if j.submit_time < window_s]


__all__ = ["BusyMeter", "Expected", "Planned", "ServingKnobs", "SimServing", "cut_trace", "declare",
           "expect", "plan_window", "pool_nodes"]
