"""Lending and taking back: how many replicas each deployment holds, step by step (issue 19,
item 3), and what that leaves for training.

At every step ``t`` a deployment *holds* replicas (ready or warming up); the rest of its pool is
*lent* to preemptible training. The rule, per mode:

- ``static``: the whole pool, always (the chapter's scenario A; nothing is lent).
- ``forecast``: hold ``max(upper(τ))`` over ``τ in [t, t + switch_in + margin]``, with
  ``upper = forecast + buffer`` (:class:`Upper`). A replica needed at ``τ`` must start warming at
  ``τ - switch_in`` (checkpoint the borrower, start the server, load, warm up), so the window
  makes the planner take GPUs back early enough, and give them back only once the forecast stays
  low for a whole switch-in.
- ``reactive``: the same with ``upper = demand now + buffer`` (no forecast): the baseline that
  shows why a 5-20 minute switch must follow a forecast.

Whatever the mode, demand above what is held starts replicas at once (the reactive path: class 0
preempts); those starts are counted. A replica serves only once warm: demand above the ready
replicas is *unmet*, in replica-minutes. A *late* replica is one more replica of unmet demand than
the step before (each replica that was needed and not ready counts once).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from railgang.daemon.serving.model import Deployment

Mode = Literal["static", "forecast", "reactive"]
MODES: tuple[Mode, ...] = ("static", "forecast", "reactive")


@dataclass(frozen=True, slots=True)
class Upper:
    """The planner's upper bound of demand at every plan step: forecast mean + buffer."""

    values: Sequence[float]  # replicas, one per plan step (forecast mean, or demand for oracle)
    buffer: float = 0.0  # replicas added on top (a quantile of the forecast error)

    def at(self, k: int) -> float:
        return self.values[min(k, len(self.values) - 1)] + self.buffer if self.values else 0.0


@dataclass(frozen=True, slots=True)
class PlanConfig:
    step_s: float = 60.0
    margin_s: float = 300.0  # taken back this much before the switch-in alone would need
    mode: Mode = "forecast"


@dataclass
class Timeline:
    """One deployment's plan, one entry per step."""

    deployment: Deployment
    step_s: float
    demand: list[int] = field(default_factory=list)
    ready: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)  # ready + warming
    unmet: list[int] = field(default_factory=list)  # replicas of demand not served
    reactive_starts: int = 0  # replicas started because demand exceeded what was held
    planned_starts: int = 0  # replicas started ahead of forecast demand
    late: int = 0  # replicas needed before they were ready
    # GPUs lent per step as a replay measured them (whole nodes: ``replay.SimServing``);
    # None: a plan's, the pool less what is held
    lent: list[int] | None = None

    @property
    def lent_gpus(self) -> list[int]:
        if self.lent is not None:
            return self.lent
        pool = self.deployment.pool_gpus
        return [max(0, pool - h * self.deployment.tp) for h in self.held]


def plan(dep: Deployment, demand: Sequence[int], upper: Upper | None,
         config: PlanConfig) -> Timeline:
    """Step through ``demand`` (replicas needed per plan step) and decide what to hold."""
    step = config.step_s
    switch_steps = max(1, math.ceil(dep.switch_in_s / step))
    window = switch_steps + math.ceil(config.margin_s / step)
    tl = Timeline(dep, step)
    cap = max(dep.max_replicas, dep.min_replicas)
    ready = cap if config.mode == "static" else min(cap, max(dep.min_replicas,
                                                             demand[0] if demand else 0))
    warming: deque[int] = deque()  # step at which each warming replica is ready, in order
    last_unmet = 0
    for k, need in enumerate(demand):
        while warming and warming[0] <= k:
            warming.popleft()
            ready += 1
        target = _target(dep, demand, upper, config.mode, k, window, cap)
        held = ready + len(warming)
        if need > held:  # the reactive path: start what demand lacks, now
            extra = min(need, cap) - held
            if extra > 0:
                warming.extend([k + switch_steps] * extra)
                tl.reactive_starts += extra
                held += extra
        if target > held:
            warming.extend([k + switch_steps] * (target - held))
            tl.planned_starts += target - held
            held = target
        elif target < held and need <= target:  # drain: warming ones first, then ready ones
            drop = held - max(target, need)
            while drop and warming:
                warming.pop()
                drop -= 1
            ready -= drop
            held = ready + len(warming)
        unmet = max(0, need - ready)
        tl.late += max(0, unmet - last_unmet)
        last_unmet = unmet
        tl.demand.append(need)
        tl.ready.append(ready)
        tl.held.append(held)
        tl.unmet.append(unmet)
    return tl


def _target(dep: Deployment, demand: Sequence[int], upper: Upper | None, mode: Mode, k: int,
            window: int, cap: int) -> int:
    """Replicas to hold at step ``k``: ``[min_replicas, cap]``."""
    if mode == "static":
        return cap
    if mode == "reactive" or upper is None:
        buffer = upper.buffer if upper is not None else 0.0
        want = demand[k] + buffer
    else:
        want = max(upper.at(j) for j in range(k, k + window + 1))
    return max(dep.min_replicas, min(cap, math.ceil(want - 1e-9)))


@dataclass(frozen=True, slots=True)
class ServingOutcome:
    """What a plan did for serving, summed over its deployments."""

    demand_replica_min: float
    unmet_replica_min: float
    late_replicas: int
    reactive_starts: int
    planned_starts: int
    served_gpu_h: float  # GPU-hours of demand served (min(demand, ready) x tp)
    held_gpu_h: float  # GPU-hours the serving side held (ready or warming)
    lent_gpu_h: float  # GPU-hours lent to training
    reclaimed_gpus: int  # GPUs taken back from training, summed over every take-back

    @property
    def unmet_share(self) -> float:
        return self.unmet_replica_min / self.demand_replica_min if self.demand_replica_min else 0.0


def outcome(timelines: Sequence[Timeline]) -> ServingOutcome:
    demand = unmet = served = held = lent = 0.0
    late = reactive = planned = reclaimed = 0
    for tl in timelines:
        minutes, hours, tp = tl.step_s / 60, tl.step_s / 3600, tl.deployment.tp
        demand += sum(tl.demand) * minutes
        unmet += sum(tl.unmet) * minutes
        served += sum(min(d, r) for d, r in zip(tl.demand, tl.ready, strict=True)) * tp * hours
        held += sum(tl.held) * tp * hours
        lent_series = tl.lent_gpus
        lent += sum(lent_series) * hours
        reclaimed += sum(max(0, a - b) for a, b in itertools.pairwise(lent_series))
        late += tl.late
        reactive += tl.reactive_starts
        planned += tl.planned_starts
    return ServingOutcome(demand, unmet, late, reactive, planned, served, held, lent, reclaimed)


def lent_total(timelines: Sequence[Timeline]) -> list[int]:
    """GPUs lent per step, summed over the deployments (all on the same step grid)."""
    series = [tl.lent_gpus for tl in timelines]
    return [sum(col) for col in zip(*series, strict=True)] if series else []


__all__ = ["MODES", "Mode", "PlanConfig", "ServingOutcome", "Timeline", "Upper", "lent_total",
           "outcome", "plan"]
