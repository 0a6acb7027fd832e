"""The immutable world the decision core decides on (STYLE 2).

A :class:`Snapshot` is built once per cycle by a backend (real Slurm, the simulator, a test fake)
and never mutated: a what-if is a new snapshot (:meth:`Snapshot.replace`). Names follow Slurm's
nouns: :class:`Node`, :class:`Account`, jobs (``railgang.daemon.core.job``).

Fields
------
``now``         clock of the observation (seconds; the cycle also receives ``now`` explicitly)
``fabric``      ``railgang.topology.fabric.Fabric`` the placement engine searches (opaque to the core)
``health``      optional link health from ``topology`` (passed through to ``place``)
``nodes``       :class:`Node` per name: GPU count, state (``idle``/``drain``/``down``), tags
``free``        free GPU indices per node, ``Mapping[str, frozenset[int]]``; drained/down nodes
                must already be absent or empty
``running``     :class:`~railgang.daemon.core.job.RunningJob` per job id
``pending``     the queue, :class:`~railgang.daemon.core.job.Job` in submit order
``accounts``    :class:`Account` per name (fair-share, usage, optional GPU quota)
``preemptions`` recent :class:`PreemptEvent` (for the churn budget window)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from railgang.daemon.core.job import Job, RunningJob


@dataclass(frozen=True)
class Node:
    """A compute node (Slurm ``NodeName``) as far as scheduling is concerned."""

    name: str
    gpus: int
    state: str = "idle"  # idle | mixed | alloc | drain | down
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Account:
    """A Slurm account: fair-share and an optional hard GPU quota."""

    name: str
    share: float = 1.0  # normalised shares (Slurm fairshare numerator)
    usage_gpu_s: float = 0.0  # decayed historical usage, GPU-seconds
    quota_gpus: int | None = None  # max GPUs running at once; None = unlimited


@dataclass(frozen=True)
class PreemptEvent:
    """A preemption the cluster already paid for (time, job, GPUs freed)."""

    time: float
    job_id: str
    gpus: int


def _freeze_free(free: Mapping[str, Iterable[int]]) -> Mapping[str, frozenset[int]]:
    return MappingProxyType({n: frozenset(g) for n, g in sorted(free.items())})


@dataclass(frozen=True)
class Snapshot:
    """Everything one decision cycle may look at. Build with :func:`make_snapshot`."""

    now: float
    fabric: Any  # railgang.topology.fabric.Fabric (kept opaque so the core never inspects its internals)
    nodes: Mapping[str, Node]
    free: Mapping[str, frozenset[int]]
    running: Mapping[str, RunningJob]
    pending: tuple[Job, ...]
    accounts: Mapping[str, Account] = field(default_factory=lambda: MappingProxyType({}))
    preemptions: tuple[PreemptEvent, ...] = ()
    health: Any = None  # topology link health, or None

    def __post_init__(self) -> None:
        object.__setattr__(self, "free", _freeze_free(self.free))
        object.__setattr__(self, "nodes", MappingProxyType(dict(sorted(self.nodes.items()))))
        object.__setattr__(self, "running", MappingProxyType(dict(sorted(self.running.items()))))
        object.__setattr__(self, "accounts", MappingProxyType(dict(self.accounts)))
        object.__setattr__(self, "pending", tuple(self.pending))
        object.__setattr__(self, "preemptions", tuple(self.preemptions))

    # -- derived views (cheap, no caching needed at 10k GPUs) ----------------------------------
    @property
    def total_gpus(self) -> int:
        """GPUs on nodes that can run work (not drained or down)."""
        return sum(n.gpus for n in self.nodes.values() if n.state not in ("drain", "down"))

    @property
    def free_gpus(self) -> int:
        return sum(len(g) for g in self.free.values())

    def account(self, name: str) -> Account:
        return self.accounts.get(name) or Account(name)

    def account_running_gpus(self) -> dict[str, int]:
        """GPUs each account holds now."""
        out: dict[str, int] = {}
        for r in self.running.values():
            out[r.job.account] = out.get(r.job.account, 0) + r.gpus
        return out

    def replace(self, **changes: Any) -> Snapshot:
        """A what-if: a new snapshot with ``changes`` applied (this one is untouched)."""
        return dataclasses.replace(self, **changes)


def make_snapshot(
    *,
    now: float,
    fabric: Any,
    nodes: Iterable[Node],
    free: Mapping[str, Iterable[int]] | None = None,
    running: Iterable[RunningJob] = (),
    pending: Iterable[Job] = (),
    accounts: Iterable[Account] = (),
    preemptions: Iterable[PreemptEvent] = (),
    health: Any = None,
) -> Snapshot:
    """Build a snapshot; ``free`` defaults to every GPU not assigned to a running job."""
    node_map = {n.name: n for n in nodes}
    run_map = {r.job_id: r for r in running}
    if free is None:
        used: dict[str, set[int]] = {}
        for r in run_map.values():
            for n, gs in r.assignment.items():
                used.setdefault(n, set()).update(gs)
        free = {
            n.name: frozenset(range(n.gpus)) - used.get(n.name, set())
            for n in node_map.values()
            if n.state not in ("drain", "down")
        }
    return Snapshot(
        now=now,
        fabric=fabric,
        nodes=node_map,
        free=_freeze_free(free),
        running=run_map,
        pending=tuple(pending),
        accounts={a.name: a for a in accounts},
        preemptions=tuple(preemptions),
        health=health,
    )


__all__ = ["Account", "Node", "PreemptEvent", "Snapshot", "make_snapshot"]
