"""Flaky nodes (issue 20 item 2): a node that fails jobs repeatedly is drained with a
``railgang:`` reason and comes back only after a burn-in job on it passes.

A pure state machine over immutable values: :func:`observe` takes the faults seen this cycle and
returns the new :class:`FlakyState` and the :class:`Step` s to take (drain, run the burn-in,
resume); :func:`burn_in_done` takes a burn-in's outcome. The daemon applies the steps through its
backend and keeps the state between cycles; ``railgang explain`` and the report read
:meth:`FlakyState.why` for a node.

Per node: ``ok`` → (``count`` job failures within ``window_s``) → ``drained`` → (burn-in
submitted) → ``burn_in`` → passed: ``ok`` (its failure history forgotten) / failed: ``drained``
again, and the burn-in is retried after ``retry_s``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from railgang.daemon.failures.detect import Fault

__all__ = ["FlakyRules", "FlakyState", "NodeStatus", "Step", "StepKind", "adopt", "burn_in_done",
           "burn_in_started", "observe"]

REASON_PREFIX = "railgang: flaky"


@dataclass(frozen=True, slots=True)
class FlakyRules:
    count: int = 3  # job failures on one node ...
    window_s: float = 86400.0  # ... within this long make it flaky
    retry_s: float = 3600.0  # a failed burn-in is tried again after this long

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"flaky count {self.count}: expected >= 1")
        for name in ("window_s", "retry_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"flaky {name} {value!r}: expected a finite number > 0")


class NodeStatus(enum.Enum):
    OK = "ok"
    DRAINED = "drained"  # waiting for a burn-in
    BURN_IN = "burn_in"  # its burn-in job runs


class StepKind(enum.Enum):
    DRAIN = "drain"  # drain the node with ``reason``
    BURN_IN = "burn_in"  # submit the burn-in job on the node
    RESUME = "resume"  # the burn-in passed: resume the node
    RELEASE = "release"  # a burn-in reservation nobody holds (left by a stopped daemon): delete it


@dataclass(frozen=True, slots=True)
class Step:
    kind: StepKind
    node: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class _Node:
    status: NodeStatus = NodeStatus.OK
    failures: tuple[float, ...] = ()  # times of job failures inside the window
    reason: str = ""  # why it was drained
    since: float = 0.0  # when it entered its status
    burn_ins: int = 0  # burn-ins failed since it was drained
    retry_at: float = 0.0  # no burn-in before this


@dataclass(frozen=True)
class FlakyState:
    nodes: Mapping[str, _Node] = field(default_factory=lambda: MappingProxyType({}))

    def status(self, node: str) -> NodeStatus:
        n = self.nodes.get(node)
        return n.status if n is not None else NodeStatus.OK

    def why(self, node: str) -> str | None:
        """What ``railgang explain`` says about a node held out as flaky (None when it is not)."""
        n = self.nodes.get(node)
        if n is None or n.status is NodeStatus.OK:
            return None
        tail = ("burn-in running" if n.status is NodeStatus.BURN_IN
                else f"waiting for a burn-in ({n.burn_ins} failed)" if n.burn_ins
                else "waiting for a burn-in")
        return f"{n.reason}; {tail}"

    def held_out(self) -> tuple[str, ...]:
        return tuple(sorted(k for k, n in self.nodes.items() if n.status is not NodeStatus.OK))

    def _with(self, node: str, value: _Node) -> FlakyState:
        nodes = dict(self.nodes)
        nodes[node] = value
        return FlakyState(MappingProxyType(nodes))


def observe(state: FlakyState, faults: Iterable[tuple[float, Fault]], now: float,
            rules: FlakyRules) -> tuple[FlakyState, list[Step]]:
    """Count this cycle's job-killing faults ``(time, fault)`` per node; drain a node that
    reached ``rules.count`` inside the window; ask for burn-ins on drained nodes that are due.

    Only faults that name a job count (a job failed there); a fault of a node already held out
    is not counted again. Time may come in any order; NaN times are skipped.
    """
    steps: list[Step] = []
    for at, fault in sorted(faults, key=lambda p: (p[0], p[1].node or "")):
        if fault.node is None or fault.job_id is None or not math.isfinite(at):
            continue
        n = state.nodes.get(fault.node, _Node())
        if n.status is not NodeStatus.OK:
            continue
        recent = tuple(t for t in (*n.failures, at) if now - t < rules.window_s)
        if len(recent) >= rules.count:
            hours = rules.window_s / 3600.0
            reason = (f"{REASON_PREFIX}: {len(recent)} job failures in {hours:g} h "
                      f"(last: {fault.kind.value} of job {fault.job_id})")[:200]
            n = _Node(NodeStatus.DRAINED, recent, reason, now)
            steps.append(Step(StepKind.DRAIN, fault.node, reason))
        else:
            n = replace(n, failures=recent)
        state = state._with(fault.node, n)
    for node, n in sorted(state.nodes.items()):
        if n.status is NodeStatus.DRAINED and now >= n.retry_at:
            steps.append(Step(StepKind.BURN_IN, node, n.reason))
    return state, steps


def adopt(state: FlakyState, node: str, status: NodeStatus, reason: str, now: float) -> FlakyState:
    """Take over ``node`` as Slurm shows it after a daemon restart (the memory was lost):
    drained by railgang as flaky, or with its burn-in job still queued or running. A node the
    state already holds is left as it is."""
    if status is NodeStatus.OK or state.status(node) is not NodeStatus.OK:
        return state
    return state._with(node, _Node(status, (), reason[:200], now))


def burn_in_started(state: FlakyState, node: str, now: float) -> FlakyState:
    n = state.nodes.get(node)
    if n is None or n.status is not NodeStatus.DRAINED:
        return state
    return state._with(node, replace(n, status=NodeStatus.BURN_IN, since=now))


def burn_in_done(state: FlakyState, node: str, passed: bool, now: float,
                 rules: FlakyRules) -> tuple[FlakyState, list[Step]]:
    """A burn-in on ``node`` ended: passed → resume it (history forgotten); failed → it stays
    drained and is tried again after ``rules.retry_s``."""
    n = state.nodes.get(node)
    if n is None or n.status is not NodeStatus.BURN_IN:
        return state, []
    if passed:
        return state._with(node, _Node(since=now)), [Step(StepKind.RESUME, node)]
    return state._with(node, replace(n, status=NodeStatus.DRAINED, since=now,
                                     burn_ins=n.burn_ins + 1, retry_at=now + rules.retry_s)), []
