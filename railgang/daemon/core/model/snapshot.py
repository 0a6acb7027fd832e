"""The immutable world the decision core decides on (STYLE 2).

A :class:`Snapshot` is built once per cycle by a backend (real Slurm, the simulator, a test fake)
and never mutated: a what-if is a new snapshot (:meth:`Snapshot.replace`). Names follow Slurm's
nouns: :class:`Node`, :class:`Account`, jobs (``railgang.daemon.core.model.job``).

Fields
------
``now``         clock of the observation (seconds; the cycle also receives ``now`` explicitly)
``fabric``      ``railgang.topology.fabric.Fabric`` the placement engine searches (opaque to the core)
``health``      optional link health from ``topology`` (passed through to ``place``)
``nodes``       :class:`Node` per name: GPU count, :class:`NodeState`, tags, GPU facts
``free``        free GPU indices per node, ``Mapping[str, frozenset[int]]``; drained/down nodes
                must already be absent or empty
``running``     :class:`~railgang.daemon.core.model.job.RunningJob` per job id
``pending``     the queue, :class:`~railgang.daemon.core.model.job.Job` in submit order
``accounts``    :class:`Account` per name (fair-share, usage, optional GPU quota)
``preemptions`` recent :class:`PreemptEvent` (for the churn budget window)
``quotas``      the hierarchical quota tree (:class:`~railgang.daemon.core.model.quota.QuotaTree`), or None
``serving``     serving pools and their lent nodes (:class:`~railgang.daemon.core.model.serving.ServingPool`), or None
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.needs import UNKNOWN_FACTS, GpuFacts
from railgang.daemon.core.model.quota import QuotaTree
from railgang.daemon.core.model.room import Room
from railgang.daemon.core.model.serving import ServingPool
from railgang.daemon.core.model.want import Want


class NodeState(enum.StrEnum):
    """What a node can do for the scheduler (the value is what logs and the API show)."""

    IDLE = "idle"
    MIXED = "mixed"  # some GPUs allocated
    ALLOCATED = "alloc"
    DRAIN = "drain"  # draining or drained: runs what it has, takes nothing new
    DOWN = "down"  # down, failed or not responding

    usable: bool  # True when new work may be placed on the node

    def __init__(self, value: str) -> None:
        # a plain attribute, set once per member: read for every node in every cycle
        self.usable = value not in ("drain", "down")

    @classmethod
    def parse(cls, text: str) -> NodeState:
        """A Slurm node state as ``sinfo``/``scontrol`` print it (``IDLE``, ``mix``, ``ALLOCATED``,
        ``IDLE+DRAIN``, ``DRAINING``, ``down*``, ``MIXED+COMPLETING``, ...) or one of our values.

        Drain and down flags win over the base state; a trailing ``*`` (not responding) means down.
        Raises ``ValueError`` for anything else (the caller names the node and the source).
        """
        raw = text.strip().lower()
        if not raw:
            raise ValueError("empty node state")
        words = [w.rstrip("*~#!%$@^-") for w in raw.split("+")]
        if words[0] not in _BASE and words[0] not in _DOWN and words[0] not in _DRAIN:
            raise ValueError(f"unknown node state {text.strip()!r} (expected one of Slurm's, "
                             "e.g. idle, mixed, allocated, drain, down)")
        if raw.endswith("*") or any(w in _DOWN for w in words):  # '*': not responding
            return cls.DOWN
        if any(w in _DRAIN for w in words):
            return cls.DRAIN
        return _BASE[words[0]]


_DOWN = frozenset({"down", "fail", "failing", "not_responding", "no_respond", "future", "futr",
                   "unknown", "unk"})
_DRAIN = frozenset({"drain", "drained", "draining", "drng"})
# base states; flags such as +maint, +reserved, +powered_down or a ``~`` suffix leave the base
# state as it is (Slurm itself decides who may run in a reservation or powers a node up)
_BASE = {"idle": NodeState.IDLE, "mix": NodeState.MIXED, "mixed": NodeState.MIXED,
         "alloc": NodeState.ALLOCATED, "allocated": NodeState.ALLOCATED,
         "comp": NodeState.ALLOCATED, "completing": NodeState.ALLOCATED,
         "plnd": NodeState.IDLE, "planned": NodeState.IDLE}


@dataclass(frozen=True)
class Node:
    """A compute node (Slurm ``NodeName``) as far as scheduling is concerned."""

    name: str
    gpus: int
    state: NodeState = NodeState.IDLE
    tags: frozenset[str] = frozenset()
    tier: str = ""  # capacity tier: "reserved", "on-demand", "spot" ("" = owned, no price)
    facts: GpuFacts = UNKNOWN_FACTS  # GPU type, memory, NVLink, interconnect (jobs' needs)
    room: Room | None = None  # free CPUs and memory (model/room.py); None: unknown, not checked

    def __post_init__(self) -> None:
        if not isinstance(self.state, NodeState):  # a Slurm string from an adapter: parse it once
            object.__setattr__(self, "state", NodeState.parse(str(self.state)))

    def with_state(self, state: NodeState) -> Node:
        return dataclasses.replace(self, state=state)

    def with_tag(self, tag: str) -> Node:
        return dataclasses.replace(self, tags=self.tags | {tag})


@dataclass(frozen=True)
class Account:
    """A Slurm account: fair-share and an optional hard GPU quota."""

    name: str
    share: float = 1.0  # normalised shares (Slurm fairshare numerator)
    usage_gpu_s: float = 0.0  # decayed historical usage, GPU-seconds
    quota_gpus: int | None = None  # max GPUs running at once; None = unlimited
    # GPU-seconds used lately, each decayed by 2^(-age / half-life) (model/fairshare.py): the
    # fair-share input ``default`` orders by; 0 = none known
    recent_gpu_s: float = 0.0


@dataclass(frozen=True)
class PreemptEvent:
    """A preemption the cluster already paid for (time, job, GPUs freed)."""

    time: float
    job_id: str
    gpus: int


# -- the snapshot index: what a backend that keeps its cluster between cycles already counted --
@dataclass(frozen=True, slots=True)
class SnapshotIndex:
    """Counts of one snapshot that its backend kept up to date (see the module docstring)."""

    total_gpus: int  # GPUs on usable nodes
    free_gpus: int  # GPUs in ``Snapshot.free``
    held: Mapping[str, int]  # GPUs each account's running jobs hold
    elastic_running: tuple[RunningJob, ...]  # running jobs with an elastic range, by job id
    running_per_class: tuple[int, ...]  # running jobs per priority class (0 … 3)
    pools: Any = None  # model.pools.Pools: the usable nodes by (GPU type, tier); None: derive
    # ``plan.rigid_by_submit(pending)``, FIFO's plan order: it changes only as jobs arrive, start
    # and are requeued, so a backend keeps it instead of a sort and a Want per job per cycle
    submit_order: tuple[Want, ...] | None = None  # None: derive
    # ``Snapshot.account_quotas``: a backend whose accounts carry no flat quota says so, and the
    # accounts (built when read, the simulator's) are not all built every cycle to find out
    account_quotas: Mapping[str, int] | None = None  # None: derive
    queue: QueueSummary | None = None  # facts of the whole queue, kept as jobs enter and leave
    # (None: none; the core then walks the queue, as it does without an index)


@dataclass(frozen=True)
class QueueSummary:
    """Facts of the whole waiting queue that the core would otherwise find by walking it every
    cycle (issue 24 item 2), kept by a backend as jobs enter and leave it. True of the queue, so
    of any part. (The place phase reads none: its scheduling signatures, ``model/signature.py``,
    take the place of the walk that needed the largest minimum size and the jobs with needs.)"""

    kinds: int  # distinct (priority class, requeued after a fault) among the waiting jobs


def queue_summary(pending: Iterable[Job]) -> QueueSummary:
    """The :class:`QueueSummary` of ``pending``, walked (what a kept one must equal)."""
    return QueueSummary(len({(j.priority_class, j.state.after_fault) for j in pending}))


def usable_gpus(nodes: Mapping[str, Node]) -> int:
    """GPUs on the nodes that can run work."""
    return sum(n.gpus for n in nodes.values() if n.state.usable)


def held_by_account(running: Mapping[str, RunningJob]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in running.values():
        acc = r.job.request.account
        out[acc] = out.get(acc, 0) + r.gpus
    return out


def per_class(running: Mapping[str, RunningJob]) -> tuple[int, ...]:
    per = [0, 0, 0, 0]
    for r in running.values():
        per[r.priority_class] += 1
    return tuple(per)


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
    quotas: QuotaTree | None = None  # None: no quota tree (only the flat Account.quota_gpus)
    tiers: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # tier name ->
    # railgang.daemon.core.model.tiers.TierTerms (price, interruption rate); empty = no prices known
    serving: ServingPool | None = None  # serving pools and the nodes lent from them (issue 19;
    # model/serving.py); None: no serving pools, every node is anyone's
    index: SnapshotIndex | None = field(default=None, compare=False, repr=False)  # counts its
    # backend kept between cycles (the simulator; ``SnapshotIndex``); None = derived here

    def __post_init__(self) -> None:
        # a read-only mapping (``MappingProxyType``) is taken as it is: the caller built it
        # sorted by name (a snapshot's own, under ``replace``; a backend that keeps one between
        # cycles while its nodes or free GPUs do not change: issue 12, speed)
        if type(self.free) is not MappingProxyType:
            object.__setattr__(self, "free", _freeze_free(self.free))
        if type(self.nodes) is not MappingProxyType:
            object.__setattr__(self, "nodes", MappingProxyType(dict(sorted(self.nodes.items()))))
        if type(self.running) is not MappingProxyType:
            object.__setattr__(self, "running", MappingProxyType(dict(sorted(self.running.items()))))
        if type(self.accounts) is not MappingProxyType:
            object.__setattr__(self, "accounts", MappingProxyType(dict(self.accounts)))
        object.__setattr__(self, "pending", tuple(self.pending))
        object.__setattr__(self, "preemptions", tuple(self.preemptions))

    # -- derived views, computed once per snapshot (it is immutable; a simulated replay asks for
    # them several times in each of tens of thousands of cycles: issue 12, speed) --------------
    @functools.cached_property
    def total_gpus(self) -> int:
        """GPUs on nodes that can run work (not drained or down)."""
        return self.index.total_gpus if self.index is not None else usable_gpus(self.nodes)

    @functools.cached_property
    def free_gpus(self) -> int:
        if self.index is not None:
            return self.index.free_gpus
        return sum(len(g) for g in self.free.values())

    @functools.cached_property
    def elastic_running(self) -> tuple[RunningJob, ...]:
        """The running jobs with an elastic range, by job id (the only ones a plan can size)."""
        if self.index is not None:
            return self.index.elastic_running
        return tuple(r for r in self.running.values() if r.job.request.elastic)

    @functools.cached_property
    def running_per_class(self) -> tuple[int, ...]:
        """Running jobs per priority class (0 serving … 3 batch)."""
        return self.index.running_per_class if self.index is not None else per_class(self.running)

    def account(self, name: str) -> Account:
        return self.accounts.get(name) or Account(name)

    @functools.cached_property
    def account_quotas(self) -> Mapping[str, int]:
        """Each account's flat quota (``Account.quota_gpus``), for the accounts that have one."""
        if self.index is not None and self.index.account_quotas is not None:
            return self.index.account_quotas
        return {n: a.quota_gpus for n, a in self.accounts.items() if a.quota_gpus is not None}

    def account_running_gpus(self) -> dict[str, int]:
        """GPUs each account holds now (a fresh dict: callers keep their own tally in it)."""
        return dict(self._account_running_gpus)

    @functools.cached_property
    def _account_running_gpus(self) -> dict[str, int]:
        if self.index is not None:
            return dict(self.index.held)
        return held_by_account(self.running)

    def replace(self, **changes: Any) -> Snapshot:
        """A what-if: a new snapshot with ``changes`` applied (this one is untouched)."""
        if "pending" in changes and "index" not in changes and self.index is not None:
            # another queue (the serving step hides replicas): the order kept for this one is not its
            changes["index"] = dataclasses.replace(self.index, submit_order=None, queue=None)
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
    quotas: QuotaTree | None = None,
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
            if n.state.usable
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
        quotas=quotas,
    )


__all__ = ["Account", "Node", "NodeState", "PreemptEvent", "Snapshot", "SnapshotIndex", "held_by_account",
           "make_snapshot", "per_class", "usable_gpus"]
