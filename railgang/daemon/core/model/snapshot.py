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
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from railgang.daemon.core.model.job import Job, RunningJob
from railgang.daemon.core.model.node import Node, NodeState
from railgang.daemon.core.model.pool_map import Pools, pools_of_nodes
from railgang.daemon.core.model.queue_order import rigid_by_submit
from railgang.daemon.core.model.quota import QuotaTree
from railgang.daemon.core.model.serving import ServingPool
from railgang.daemon.core.model.want import Want


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


# -- the snapshot index: counts of the snapshot that every phase reads ------------------------
@dataclass(frozen=True, slots=True)
class SnapshotIndex:
    """Counts of one snapshot, kept up to date between cycles by a backend that keeps its cluster
    (the simulator); a snapshot built without one derives the same counts from its own data
    (:class:`DerivedIndex`), so the core reads them one way. Tests compare a kept index with the
    derived one at every cycle of a replay (``tests/daemon/sim/test_backend_shared.py``)."""

    total_gpus: int  # GPUs on usable nodes
    free_gpus: int  # GPUs in ``Snapshot.free``
    held: Mapping[str, int]  # GPUs each account's running jobs hold
    elastic_running: tuple[RunningJob, ...]  # running jobs with an elastic range, by job id
    running_per_class: tuple[int, ...]  # running jobs per priority class (0 … 3)
    pools: Pools  # the usable nodes by (GPU type, tier)
    submit_order: tuple[Want, ...]  # ``rigid_by_submit(pending)``, FIFO's plan order
    account_quotas: Mapping[str, int]  # each account's flat quota, where it has one
    queue: QueueSummary  # facts of the whole waiting queue


class DerivedIndex:
    """The :class:`SnapshotIndex` of a snapshot whose backend kept none, each count derived from
    the snapshot's data the first time a phase reads it (a cycle reads only some of them)."""

    def __init__(self, nodes: Mapping[str, Node], free: Mapping[str, frozenset[int]],
                 running: Mapping[str, RunningJob], pending: tuple[Job, ...],
                 accounts: Mapping[str, Account]) -> None:
        self._nodes, self._free, self._running = nodes, free, running
        self._pending, self._accounts = pending, accounts

    @functools.cached_property
    def total_gpus(self) -> int:
        return usable_gpus(self._nodes)

    @functools.cached_property
    def free_gpus(self) -> int:
        return sum(len(g) for g in self._free.values())

    @functools.cached_property
    def held(self) -> Mapping[str, int]:
        return held_by_account(self._running)

    @functools.cached_property
    def elastic_running(self) -> tuple[RunningJob, ...]:
        return tuple(r for r in self._running.values() if r.job.request.elastic)

    @functools.cached_property
    def running_per_class(self) -> tuple[int, ...]:
        return per_class(self._running)

    @functools.cached_property
    def pools(self) -> Pools:
        return pools_of_nodes(self._nodes)

    @functools.cached_property
    def submit_order(self) -> tuple[Want, ...]:
        return rigid_by_submit(self._pending)

    @functools.cached_property
    def account_quotas(self) -> Mapping[str, int]:
        return {n: a.quota_gpus for n, a in self._accounts.items() if a.quota_gpus is not None}

    @functools.cached_property
    def queue(self) -> QueueSummary:
        return queue_summary(self._pending)


@dataclass(frozen=True)
class QueueSummary:
    """Facts of the whole waiting queue, kept by a backend as jobs enter and leave it (equal to
    ``queue_summary`` of the queue). True of the queue, so
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
    # counts its backend kept between cycles (the simulator); None: derived (``DerivedIndex``)
    index: SnapshotIndex | DerivedIndex = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        # a read-only mapping (``MappingProxyType``) is the caller's promise that it is sorted by
        # name (a snapshot's own, under ``replace``; one a backend keeps between cycles), and is
        # taken as it is
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
        if self.index is None:
            object.__setattr__(self, "index", DerivedIndex(self.nodes, self.free, self.running,
                                                           self.pending, self.accounts))

    # -- the index's counts, read by name ------------------------------------------------------
    @property
    def total_gpus(self) -> int:
        """GPUs on nodes that can run work (not drained or down)."""
        return self.index.total_gpus

    @property
    def free_gpus(self) -> int:
        return self.index.free_gpus

    @property
    def elastic_running(self) -> tuple[RunningJob, ...]:
        """The running jobs with an elastic range, by job id (the only ones a plan can size)."""
        return self.index.elastic_running

    @property
    def running_per_class(self) -> tuple[int, ...]:
        """Running jobs per priority class (0 serving … 3 batch)."""
        return self.index.running_per_class

    def account(self, name: str) -> Account:
        return self.accounts.get(name) or Account(name)

    @property
    def account_quotas(self) -> Mapping[str, int]:
        """Each account's flat quota (``Account.quota_gpus``), for the accounts that have one."""
        return self.index.account_quotas

    def account_running_gpus(self) -> dict[str, int]:
        """GPUs each account holds now (a fresh dict: callers keep their own tally in it)."""
        return dict(self.index.held)

    def replace(self, **changes: Any) -> Snapshot:
        """A what-if: a new snapshot with ``changes`` applied (this one is untouched)."""
        if "index" not in changes:
            kept = self.index
            if isinstance(kept, DerivedIndex):  # derived from this snapshot's data: derive anew
                changes["index"] = None
            elif "pending" in changes:  # another queue (the serving step hides replicas)
                pending = tuple(changes["pending"])
                changes["index"] = dataclasses.replace(kept, submit_order=rigid_by_submit(pending),
                                                       queue=queue_summary(pending))
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


def rebuild_index(snapshot: Snapshot) -> SnapshotIndex:
    """The snapshot's index derived from its own data: what an index a backend kept between
    cycles must equal."""
    d = DerivedIndex(snapshot.nodes, snapshot.free, snapshot.running, snapshot.pending,
                     snapshot.accounts)
    return SnapshotIndex(d.total_gpus, d.free_gpus, d.held, d.elastic_running, d.running_per_class,
                         d.pools, d.submit_order, d.account_quotas, d.queue)


__all__ = ["Account", "DerivedIndex", "Node", "NodeState", "PreemptEvent", "QueueSummary", "Snapshot",
           "SnapshotIndex", "held_by_account", "make_snapshot", "per_class", "queue_summary",
           "rebuild_index", "usable_gpus"]
