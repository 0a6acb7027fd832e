"""The daemon's serving step: replicas ahead of the ramp, idle serving nodes lent (issue 19).

Runs every cycle between the backend's snapshot and the decision core, a step of the cycle's
pipeline (``pipeline.py``, :class:`ServingControl`; issue 34 item 1), a pure function of the
snapshot, the declared deployments and what the forecast says from now on (the facts
``serving/live.py`` reads each cycle). For each deployment:

1. **Target.** ``hold = max(upper(τ))`` over ``τ in [now, now + switch_in + margin]`` (the
   planner's rule, ``plan.py``), in ``[min_replicas, max_replicas]``: a replica needed at ``τ``
   must start warming at ``τ - switch_in``, so the ramp's replicas are released early enough.
   Demand observed *now* above that target is an unforecast surge: the reactive path starts
   those replicas at once (class 0 preempts), and they are counted (:attr:`Status.unforecast`).
2. **Replicas.** Replicas are the class-0 jobs whose request names the deployment
   (``JobRequest.serving``, the ``serving=NAME`` hint). The core sees only as many of the
   pending ones as the target lacks; the rest stay queued, out of its sight. Running replicas
   above the target are drained (``Preempt``: signalled, requeued, queued again unseen) once
   the demand now no longer needs them, newest first.
3. **Lending.** The deployment's pool keeps the nodes the target needs, those running replicas
   first, then the ones training uses least (the take-back disturbs the least work); the rest
   are lent to preemptible work (``core/model/serving.py`` says who may borrow). Each lent node
   carries the time the forecast expects it back: the first step at which the target needs it.

Nodes are whole: a replica (``tp`` GPUs) never spans a node it shares with training.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.actions import Preempt
from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.reasons import Reason
from railgang.daemon.core.model.serving import ServingPool
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.pipeline import StepOut
from railgang.daemon.serving.model import Deployment

MAX_HORIZON_STEPS = 2000  # outlook steps a deployment's forecast gives each cycle, at most


@dataclass(frozen=True, slots=True)
class Declared:
    """A deployment and the nodes of its pool (whole nodes, in the order they are lent)."""

    deployment: Deployment
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Outlook:
    """What one deployment needs: observed now, and the forecast's upper bound from now on."""

    demand_now: int  # replicas needed now (observed)
    upper: Sequence[float]  # forecast + buffer, replicas, at now, now + step_s, ...
    step_s: float = 60.0


@dataclass(frozen=True, slots=True)
class Status:
    """One deployment after a serving step (the API, metrics and logs show it)."""

    deployment: str
    target: int  # replicas the forecast wants held now (ready or warming)
    want: int  # the target, raised to the demand now (the reactive path)
    running: int
    released: int  # pending replicas the core may start this cycle
    queued: int  # pending replicas kept out of the core's sight
    drained: tuple[str, ...]  # running replicas signalled to stop
    held_nodes: tuple[str, ...]
    lent: Mapping[str, float | None]  # lent node -> expected take-back time (None: not seen)
    queued_jobs: tuple[Job, ...] = ()  # the pending replicas kept out of the core's sight
    more_at: float | None = None  # when the forecast next wants more replicas (None: not seen)

    @property
    def unforecast(self) -> int:
        """Replicas the demand now needs beyond what the forecast held (the surge)."""
        return self.want - self.target


@dataclass(frozen=True, slots=True)
class ServingStep:
    snapshot: Snapshot  # the core's input: replicas beyond the target hidden, pools set
    drains: tuple[Preempt, ...] = ()
    status: tuple[Status, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class StepConfig:
    margin_s: float = 300.0  # released this much before the switch-in alone would need
    drain_grace_s: float = 60.0  # a drained replica's grace before it is requeued
    lend_rigid: bool = False  # ServingPool.lend_rigid: rigid batch jobs borrow any lent node


def target(dep: Deployment, upper: Sequence[float], step_s: float, margin_s: float,
           k: int = 0) -> int:
    """Replicas to hold at step ``k`` of ``upper`` (module docstring, 1)."""
    window = math.ceil((dep.switch_in_s + margin_s) / step_s)
    ahead = upper[k: k + window + 1] or upper[-1:]
    want = max(ahead) if ahead else 0.0
    cap = max(dep.max_replicas, dep.min_replicas)
    return max(dep.min_replicas, min(cap, math.ceil(want - 1e-9)))


def _ahead(dep: Deployment, upper: Sequence[float], step_s: float, margin_s: float) -> Any:
    """:func:`targets` as an array: a sliding maximum in doubling strides (a cycle looks a day
    ahead, 1,440 steps, for each lent node's take-back: one window per step cost 2/3 of a
    replay with serving)."""
    window = math.ceil((dep.switch_in_s + margin_s) / step_s)
    cap = max(dep.max_replicas, dep.min_replicas)
    most = np.array(upper, dtype=float)
    n, span = len(most), 1  # most[k] = max(upper[k: k + span])
    while span < window + 1 and span < n:
        stride = min(span, window + 1 - span)
        most[: n - stride] = np.maximum(most[: n - stride], most[stride:])
        span += stride
    return np.clip(np.ceil(most - 1e-9), dep.min_replicas, cap).astype(np.int64)


def targets(dep: Deployment, upper: Sequence[float], step_s: float, margin_s: float) -> list[int]:
    """``target(dep, upper, step_s, margin_s, k)`` for every step ``k`` of ``upper``."""
    return [int(t) for t in _ahead(dep, upper, step_s, margin_s)]


def nodes_for(dep: Deployment, replicas: int, gpus_per_node: int) -> int:
    """Whole nodes ``replicas`` TP groups take (a group never shares a node's NVLink domain)."""
    if replicas <= 0:
        return 0
    if dep.tp <= gpus_per_node:
        return math.ceil(replicas / (gpus_per_node // dep.tp))
    return replicas * math.ceil(dep.tp / gpus_per_node)


def _pick_held(decl: Declared, snap: Snapshot, replicas: Sequence[RunningJob], count: int,
               borrowed: Mapping[str, int]) -> list[str]:
    nodes = [n for n in decl.nodes if n in snap.nodes]
    with_replicas = {n for r in replicas for n in r.assignment}
    order = sorted(nodes, key=lambda n: (n not in with_replicas, borrowed.get(n, 0),
                                         -decl.nodes.index(n)))
    return order[:count]


def _take_back_times(decl: Declared, ahead: Any, lent_order: Sequence[str], held: int,
                     gpn: int, now: float, step_s: float) -> dict[str, float | None]:
    """When the forecast needs each lent node back: node ``i`` (of ``lent_order``) at the first
    step whose target (``ahead``, per step) takes more than ``held + i`` nodes."""
    out: dict[str, float | None] = dict.fromkeys(lent_order)
    if not len(ahead) or not lent_order:
        return out
    dep = decl.deployment
    # nodes_for, per step
    need = -(-ahead // (gpn // dep.tp)) if dep.tp <= gpn else ahead * math.ceil(dep.tp / gpn)
    most = np.maximum.accumulate(np.maximum(need, 0))  # nodes needed by each step, at most
    for i, node in enumerate(lent_order):
        k = int(np.searchsorted(most, held + i, side="right"))
        if k >= len(most):
            break
        out[node] = now + k * step_s
    return out


def _one(decl: Declared, outlook: Outlook, snap: Snapshot, config: StepConfig,
         borrowed: Mapping[str, int]) -> tuple[Status, list[Job], list[Preempt]]:
    dep = decl.deployment
    name = dep.name
    running = sorted((r for r in snap.running.values() if r.job.request.serving == name),
                     key=lambda r: (r.start_time, r.job_id))
    live = [r for r in running if r.preempt_deadline is None]
    pending = [j for j in snap.pending if j.request.serving == name]
    tgt = target(dep, outlook.upper, outlook.step_s, config.margin_s)
    cap = max(dep.max_replicas, dep.min_replicas)
    want = max(tgt, min(cap, max(0, outlook.demand_now)))
    released = pending[: max(0, want - len(live))]
    drains: list[Preempt] = []
    if len(live) > want and outlook.demand_now <= want:  # drain the newest first
        drains = [Preempt(r.job_id, config.drain_grace_s, Reason.PRIORITY, None, r.gpus)
                  for r in live[want:][::-1]]
    gpn = max((snap.nodes[n].gpus for n in decl.nodes if n in snap.nodes), default=1)
    held_count = min(len(decl.nodes), nodes_for(dep, want, gpn))
    held = _pick_held(decl, snap, live, held_count, borrowed)
    lent_order = [n for n in reversed(decl.nodes) if n in snap.nodes and n not in held]
    lent_order.sort(key=lambda n: borrowed.get(n, 0))  # the least used goes back first
    ahead = _ahead(dep, outlook.upper, outlook.step_s, config.margin_s)
    lent = _take_back_times(decl, ahead, lent_order, len(held), gpn, snap.now, outlook.step_s)
    queued = [j for j in pending if j not in released]
    rises = np.flatnonzero(ahead[1:] > want)
    more = int(rises[0]) + 1 if len(rises) else None
    status = Status(name, tgt, want, len(live), len(released), len(queued),
                    tuple(d.job_id for d in drains), tuple(sorted(held)),
                    MappingProxyType(dict(sorted(lent.items()))), tuple(queued),
                    snap.now + more * outlook.step_s if more is not None else None)
    return status, queued, drains


def serving_step(snap: Snapshot, declared: Sequence[Declared], outlooks: Mapping[str, Outlook],
                 config: StepConfig = StepConfig()) -> ServingStep:
    """The snapshot the core decides on, the drains, and each deployment's status."""
    borrowed: dict[str, int] = {}
    for r in snap.running.values():
        if not r.job.request.serving:
            for n, gs in r.assignment.items():
                borrowed[n] = borrowed.get(n, 0) + len(gs)
    statuses: list[Status] = []
    hidden: set[str] = set()
    drains: list[Preempt] = []
    pool: dict[str, str] = {}
    lent: dict[str, float | None] = {}
    for decl in declared:
        outlook = outlooks.get(decl.deployment.name, Outlook(0, ()))
        st, keep_out, dr = _one(decl, outlook, snap, config, borrowed)
        statuses.append(st)
        hidden.update(j.job_id for j in keep_out)
        drains += dr
        pool.update(dict.fromkeys(decl.nodes, decl.deployment.name))
        lent.update(st.lent)
    serving = ServingPool(MappingProxyType(pool), MappingProxyType(lent), config.lend_rigid)
    shown = tuple(j for j in snap.pending if j.job_id not in hidden)
    return ServingStep(snap.replace(pending=shown, serving=serving), tuple(drains),
                       tuple(statuses))


@dataclass(frozen=True, slots=True)
class ServingFacts:
    """What the serving step reads each cycle (``serving/live.py`` reads the files)."""

    declared: tuple[Declared, ...]
    outlooks: Mapping[str, Outlook]
    config: StepConfig = StepConfig()


class ServingControl:
    """The serving step of the pipeline; its memory is the deployments' last statuses."""

    name = "serving"

    def initial(self) -> tuple[Status, ...]:
        return ()

    def run(self, snapshot: Snapshot, facts: Mapping[str, Any], memory: tuple[Status, ...],
            now: float) -> StepOut:
        f = facts.get(self.name)
        if not isinstance(f, ServingFacts):  # no deployment declared
            return StepOut(snapshot, (), memory)
        step = serving_step(snapshot, f.declared, f.outlooks, f.config)
        return StepOut(step.snapshot, step.drains, step.status)

    def settle(self, memory: tuple[Status, ...], results: Sequence[ActionResult],
               now: float) -> tuple[Status, ...]:
        return memory


__all__ = ["MAX_HORIZON_STEPS", "Declared", "Outlook", "ServingControl", "ServingFacts", "ServingStep", "Status",
           "StepConfig", "nodes_for", "serving_step", "target", "targets"]
