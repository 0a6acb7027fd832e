"""Serving demand replayed beside a training trace (``railgang sim --serving``; issue 19 item 4).

1. **Plan** each deployment (``plan.py``) over the simulated window: the first ``history_days``
   of the demand file are history (the forecast is fitted there, and its error on the last
   ``holdout_days`` of it sets the buffer); the window is what follows, forecast day-ahead.
2. **Lend**: the serving pool is whole nodes beside the training nodes. Whenever the plan lends
   ``L`` GPUs, ``floor(L / GPUs per node)`` serving nodes are open to training; when it takes
   GPUs back, nodes close. A closing node signals the jobs on it with ``notice_s`` of grace (the
   checkpoint part of the switch-in: they save and leave, requeued), then is hidden from the core.
   Of the open nodes the ones with the fewest busy GPUs close first (the least work disturbed).
3. **Replay** the training trace through the same engine and core twice: *static* (the serving
   nodes never open) and *dynamic* (on the plan's schedule); report serving's unmet
   demand-minutes, late replicas, training's mean JCT, GPU-hours gained and lost, and the
   cluster's utilisation (served demand + training busy GPU-hours over all GPU-hours of the
   window) static vs dynamic.

Elastic borrowers with enough whole replicas on other nodes shrink off a closing node instead
of stopping (:func:`shrink_off`). What this does not model yet: borrowers restricted to class 3
(every trace job may land on an open serving node), and a core that places elastic jobs on lent
nodes first — both are the core's decisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from railgang.daemon.serving.forecast import DAY_S, ForecastConfig, backtest, day_ahead
from railgang.daemon.serving.model import ServingSet
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
from railgang.errors import ConfigError

MAX_STEPS = 200_000  # plan steps per deployment (~139 days of minutes): a bounded replay
MAX_POOL_GPUS = 100_000  # a serving pool beyond any fleet: refused before nodes are built


@dataclass(frozen=True, slots=True)
class ServingKnobs:
    history_days: int = 7  # days of the demand file before the simulated window
    step_s: float = 60.0  # plan step
    margin_s: float = 300.0  # taken back this long before the switch-in alone needs
    forecast: ForecastConfig = field(default_factory=ForecastConfig)
    buffer_gpus: float | None = None  # a fixed buffer instead of the error quantile (chapter)
    notice_s: float = 300.0  # grace a borrower gets to checkpoint when its node is taken back
    core_rules: bool = False  # the open nodes go to the core as lent serving capacity
    lend_rigid: bool = False  # with core_rules: rigid class-3 jobs borrow any open node too
    # (Snapshot.serving): class 3 only, a rigid job only when its time limit ends before the
    # next take-back; False: any job may use an open node (the replay as first measured)


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


class LentNodes:
    """The serving pool's nodes on the plan's schedule: a ``CapacitySchedule`` for the engine.

    Event key = how many serving nodes are open to training from that time on."""

    def __init__(self, nodes: Sequence[str], gpus_per_node: int, lent_gpus: Sequence[int],
                 step_s: float, notice_s: float, origin: float = 0.0,
                 core_rules: bool = False, lend_rigid: bool = False) -> None:
        self.nodes = list(nodes)
        self.notice_s = notice_s
        self.open: set[str] = set(self.nodes)  # the engine starts with every node usable
        counts = [min(len(self.nodes), g // gpus_per_node) for g in lent_gpus] or [0]
        changes = [(k * step_s, c) for k, c in enumerate(counts) if not k or c != counts[k - 1]]
        # the engine's clock starts at the first arrival (``origin``): what was decided before
        # it holds from it on
        before = [c for t, c in changes if t <= origin]
        self._events = [(origin, str(before[-1]))] + [(t, str(c)) for t, c in changes
                                                      if t > origin]
        self.taken = 0  # node closings that found training jobs on the node
        self.signalled = 0  # jobs signalled by a closing
        self.shrunk = 0  # elastic borrowers that shrank off a closing node instead
        self.step = _LentStep(self) if core_rules else None  # the engine's pipeline step
        self.lend_rigid = lend_rigid

    def _lent(self, snapshot: Any) -> tuple[Any, tuple[()]]:
        """The open nodes as lent serving capacity, each expected back at the next event that
        closes a node (conservative: whichever node closes, every open one may)."""
        from types import MappingProxyType

        from railgang.daemon.core.model.serving import ServingPool

        now, count = snapshot.now, len(self.open)
        back = next((t for t, key in self._events if t > now and int(key) < count), None)
        opened = {n: "serving" for n in sorted(self.open)}
        return snapshot.replace(serving=ServingPool(
            MappingProxyType(opened), MappingProxyType(dict.fromkeys(opened, back)),
            self.lend_rigid)), ()

    def events(self) -> Sequence[tuple[float, str]]:
        return self._events

    def apply(self, key: str, backend: Any, now: float) -> bool:
        want = int(key)
        if want > len(self.open):
            for node in [n for n in self.nodes if n not in self.open][: want - len(self.open)]:
                self.open.add(node)
                restore(backend, node)
            return True
        if want == len(self.open):
            return False

        def busy(node: str) -> tuple[int, str]:
            return backend.nodes[node].gpus - len(backend.free[node]), node

        for node in sorted(self.open, key=busy)[: len(self.open) - want]:
            self.open.discard(node)
            self.shrunk += shrink_off(backend, node, now)
            hit = withdraw(backend, node, now, self.notice_s)
            self.taken += hit > 0
            self.signalled += hit
        return True


def shrink_off(backend: Any, node: str, now: float) -> int:
    """Elastic borrowers that hold GPUs on ``node`` and enough whole replicas elsewhere shrink
    to those (a resize: no checkpoint, no requeue) before the node is withdrawn; the others are
    stopped by :func:`withdraw`. Returns the jobs shrunk."""
    from railgang.daemon.core import Resize

    shrunk = 0
    for sj in list(backend.running.values()):
        held = sj.assignment
        if held is None or node not in held or sj.kill_at is not None or not sj.tj.elastic_min:
            continue
        per = max(1, sj.gpus // max(1, sj.replicas))  # GPUs per data-parallel replica
        keep: dict[str, tuple[int, ...]] = {}
        room = (sum(len(g) for n, g in held.items() if n != node) // per) * per
        for n in sorted(held):
            if n != node and room > 0:
                keep[n] = tuple(sorted(held[n]))[:room]
                room -= len(keep[n])
        replicas = sum(map(len, keep.values())) // per
        if replicas < sj.tj.elastic_min:
            continue
        done = backend.apply([Resize(sj.tj.job_id, replicas, keep, old_replicas=sj.replicas)],
                             now)
        shrunk += bool(done and done[0].ok)
    return shrunk


def withdraw(backend: Any, node: str, now: float, notice_s: float) -> int:
    """Take ``node`` from training: hide it from the core and give its jobs ``notice_s`` to save
    and leave (a panic checkpoint when the notice covers it). Returns the jobs signalled."""
    return int(backend.withdraw(node, now, notice_s))


def restore(backend: Any, node: str) -> None:
    """Give ``node`` back to training."""
    backend.back((node,))


class BusyMeter:
    """The engine's observer: training GPUs held, integrated over ``[0, until]``."""

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
        self._busy = sum(sj.gpus for sj in backend.running.values())

    def close(self) -> float:
        if self._t < self.until:
            self.gpu_s += self._busy * (self.until - self._t)
            self._t = self.until
        return self.gpu_s


class _LentStep:
    """The lending model's open nodes as a pipeline step (``pipeline.py``)."""

    name = "serving"

    def __init__(self, schedule: Any) -> None:
        self.schedule = schedule

    def initial(self) -> None:
        return None

    def run(self, snapshot: Any, facts: Any, memory: None, now: float) -> Any:
        from railgang.daemon.pipeline import StepOut

        return StepOut(self.schedule._lent(snapshot)[0])

    def settle(self, memory: None, results: Any, now: float) -> None:
        return None


def serving_nodes(fabric: Any, pool_gpus: int) -> list[str]:
    """The last nodes of ``fabric`` that hold ``pool_gpus`` (the serving pool, whole nodes)."""
    if pool_gpus > MAX_POOL_GPUS:
        raise ConfigError(f"a serving pool of {pool_gpus:,} GPUs is more than {MAX_POOL_GPUS:,}")
    names = list(fabric.nodes)
    gpn = fabric.facts(names[0]).gpus
    count = math.ceil(pool_gpus / gpn)
    if count >= len(names):
        raise ConfigError(f"the serving pool ({pool_gpus} GPUs, {count} nodes) leaves no "
                          f"training nodes of {len(names)}")
    return names[-count:]


def cut_trace(jobs: Sequence[Any], window_s: float) -> list[Any]:
    """Jobs submitted inside the window (the plan says nothing about later)."""
    return [j for j in jobs if j.submit_time < window_s]


__all__ = ["BusyMeter", "Expected", "LentNodes", "Planned", "ServingKnobs", "cut_trace", "expect",
           "plan_window", "restore", "serving_nodes", "shrink_off", "withdraw"]
