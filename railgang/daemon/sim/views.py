"""What the simulator's snapshots share from cycle to cycle (issue 12, speed).

A replay hands the decision core a snapshot at every cycle, and most of the cluster does not
change between two of them. The pieces here let ``SimBackend.snapshot`` cost what changed:

- :class:`LiveRunning` — a running job's view that answers "attained service / work left as of
  ``now``" from the job's progress line as of its last change (no clock inside it).
  Its ``RunningJob`` view is kept from snapshot to snapshot while the job does not change
  (``SimJob.running_view``); the core reads the state of few running jobs per cycle.
- :func:`sorted_views` — the running mapping by job id, built from the kept views in C loops.
- :func:`lazy_accounts` — accounts whose usage is summed when first read (only fair-share
  policies read it).
- :class:`SubmitOrder` — the queue's ``Want``s in FIFO's order (``SnapshotIndex.submit_order``),
  changed as jobs arrive, start and are requeued instead of sorted and built every cycle.

Every number is computed by the arithmetic and in the order the eager code used, so the floats
and the schedules are the same (the identical ``--json`` check in BENCHMARKS).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from railgang.daemon.core.model.fairshare import DecayedUse, running_use
from railgang.daemon.core.model.job import Job, JobRequest, JobState, RunningJob
from railgang.daemon.core.model.needs import GpuFacts
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.model.snapshot import Account, Node, QueueSummary

Line = tuple[JobState, float, float, int, float, float | None, float | None, float, float]
"""A running job's progress line as of its last change: its state then (preemptions), GPU-s
attained, the time of that, GPUs, service per GPU-second, work left (None: not told), moving
after (None: stopped), work rate, GPU-s attained when this run began."""

_new, _put = object.__new__, object.__setattr__
_VIEW = attrgetter("view")


def attained(line: Line, now: float) -> float:
    """GPU-seconds attained as of ``now`` (``SimJob.progress_at``'s arithmetic)."""
    dt = now - line[2]
    return line[1] + line[3] * (dt if dt > 0.0 else 0.0) * line[4]


def work_left(line: Line, now: float) -> float | None:
    """Work left at the requested size as of ``now`` (None: the core is not told it)."""
    _, _, as_of, _, _, remaining, busy_until, rate, _ = line
    if remaining is not None and busy_until is not None:  # oracle, not stopped
        moving_since = as_of if as_of > busy_until else busy_until
        if now > moving_since:
            remaining = max(0.0, remaining - rate * (now - moving_since))
    return remaining


class LiveRunning(RunningJob):
    """A running job's view whose progress is computed for the time it is asked about
    (:meth:`attained_at`, :meth:`work_left_at`) from its progress line as of its last change;
    its ``job`` is the job as of that change (preemptions, last preemption). Nothing in it moves
    with time, so a view is kept from snapshot to snapshot while its job does not change, and
    an older snapshot still held somewhere reads its own time by asking for it. Built only
    through :meth:`of`."""

    line: Line

    @classmethod
    def of(cls, base: RunningJob, line: Line) -> LiveRunning:
        live = _new(cls)
        fields = dict(base.__dict__)
        fields["line"] = line
        _put(live, "__dict__", fields)
        return live

    def attained_at(self, now: float) -> float:
        return attained(self.line, now)

    def work_left_at(self, now: float) -> float | None:
        return work_left(self.line, now)

    def expected_end(self, now: float) -> float:
        """``RunningJob.expected_end`` with its chain of calls (remaining_at, work_left_at, the
        request's rate) folded into one, the same arithmetic in the same order: a backfill
        reservation asks it of every running job in every cycle (issue 24 item 2)."""
        work = work_left(self.line, now)
        if work is None:
            return RunningJob.expected_end(self, now)  # (the time limit, if any)
        request, replicas = self.job.request, self.replicas
        r = 1.0 if replicas == request.replicas else request.rate(replicas)
        end = now + (work / r if r > 0 else float("inf"))
        deadline = self.preempt_deadline
        return end if deadline is None or self.shrink_to is not None else min(end, max(now, deadline))


def sorted_views(running: Mapping[str, Any], ids: list[str]) -> Mapping[str, RunningJob]:
    """The kept views of ``running`` (job id -> a job with a fresh ``view``) in the order of
    ``ids`` (its keys, sorted)."""
    return MappingProxyType(dict(zip(ids, map(_VIEW, map(running.__getitem__, ids)), strict=True)))


class RunningShown:
    """The snapshots' running mapping by job id (sorted), kept between them with what changed
    since the last one: the jobs that entered and left, and those whose view went
    (``SimJob.changed`` adds to ``stale``). The next mapping is the last one patched
    (:func:`patched_views`) or, when that cannot be done, built again (:func:`sorted_views`)."""

    def __init__(self) -> None:
        self.ids: list[str] = []  # the running jobs' ids, sorted
        self.came: list[str] = []
        self.gone: list[str] = []
        self.stale: set[str] = set()
        self.shown: Mapping[str, RunningJob] | None = None

    def entered(self, sj: Any) -> None:
        sj.stale = self.stale
        self.came.append(sj.tj.job_id)
        bisect.insort(self.ids, sj.tj.job_id)

    def left(self, job_id: str) -> None:
        self.gone.append(job_id)
        del self.ids[bisect.bisect_left(self.ids, job_id)]

    def mapping(self, running: Mapping[str, Any], oracle: bool) -> tuple[Mapping[str, RunningJob], bool]:
        """The mapping for a snapshot now, every view fresh; True when it is not the last one."""
        came, gone, stale, shown = self.came, self.gone, self.stale, self.shown
        if shown is not None and not (came or gone or stale):
            return shown, False
        for jid in (*stale, *came):
            sj = running.get(jid)
            if sj is not None and sj.view is None:
                sj.running_view(oracle)  # the job changed since its view was built
        out = patched_views(shown, running, came, gone, stale)
        if out is None:
            if not all_fresh(running):  # (a view that went without telling: never so far)
                for sj in [sj for sj in running.values() if sj.view is None]:
                    sj.running_view(oracle)
            out = sorted_views(running, self.ids)
        came.clear()
        gone.clear()
        stale.clear()
        self.shown = out
        return out, True


def patched_views(shown: Mapping[str, RunningJob] | None, running: Mapping[str, Any],
                  came: list[str], left: list[str], stale: set[str]) -> Mapping[str, RunningJob] | None:
    """:func:`sorted_views` of ``running`` from the last one (``shown``) and what changed since:
    a copy of it (one C call) without the jobs that ``left``, with the views of the ``stale``
    ones replaced and the jobs that ``came`` appended, when their ids all sort after the rest
    (ids follow submit order, and new starts are mostly the newest jobs). None when they do not,
    or with nothing to patch: the caller builds it from scratch."""
    if shown is None:
        return None
    out = dict(shown)
    for jid in left:
        out.pop(jid, None)  # (a job that came and left between two snapshots was never shown)
    new = sorted({jid for jid in came if jid in running and jid not in out})
    if new and out and new[0] <= next(reversed(out)):
        return None
    for jid in stale:
        if jid in out and jid in running:
            out[jid] = running[jid].view
    for jid in new:
        out[jid] = running[jid].view
    if len(out) != len(running):
        return None  # (a job left and came back: its id was shown and kept its place)
    return MappingProxyType(out)


def all_fresh(running: Mapping[str, Any]) -> bool:
    """Every running job still has its view (none changed since it was built)."""
    return all(map(_VIEW, running.values()))


class _Usage:
    """Each account's GPU-seconds as of one snapshot, summed when first read: what finished
    runs used, plus each running job's service in this run (in the backend's order of its
    running jobs, as the eager sum went)."""

    __slots__ = ("_done", "_now", "_recent", "_recent_table", "_table", "_views")

    def __init__(self, done: dict[str, float], views: list[RunningJob], now: float,
                 recent: DecayedUse | None = None) -> None:
        self._done, self._views, self._now = done, views, now
        self._table: dict[str, float] | None = None
        self._recent = recent  # the fair-share input, summed on first read
        self._recent_table: dict[str, float] | None = None

    def recent(self, account: str) -> float:
        """Decayed use of the account's finished runs and current runs (``core.model.fairshare``:
        the arithmetic the daemon uses on the ledger and squeue)."""
        table = self._recent_table
        if table is None:
            table = self._recent_table = recent_use(self._recent, self._views, self._now)
        return table.get(account, 0.0)

    def of(self, account: str) -> float:
        table = self._table
        if table is None:
            table = self._table = self._done
            now = self._now
            for view in self._views:
                line: Line = view.line  # type: ignore[attr-defined]
                acc = view.job.request.account
                table[acc] = table.get(acc, 0.0) + attained(line, now) - line[8]
        return table.get(account, 0.0)


class _LazyAccount(Account):
    """An account whose ``usage_gpu_s`` and ``recent_gpu_s`` are summed on first read, from the
    :class:`_Usage` of the one snapshot it was built for."""

    @property  # the field, summed on first read
    def usage_gpu_s(self) -> float:
        usage: _Usage = self.__dict__["_usage"]
        return usage.of(self.name)

    @property  # the field, summed on first read
    def recent_gpu_s(self) -> float:
        usage: _Usage = self.__dict__["_usage"]
        return usage.recent(self.name)


def recent_use(recent: DecayedUse | None, running: list[RunningJob], now: float) -> dict[str, float]:
    """Each account's fair-share input at ``now``: its finished runs (``recent``, kept as runs
    end) and its running jobs, both decayed (None: not kept, no input)."""
    if recent is None:
        return {}
    table = recent.all_at(now)
    for acc, v in running_use(running, now, recent.half_life_s).items():
        table[acc] = table.get(acc, 0.0) + v
    return table


class _LazyAccounts(Mapping[str, Account]):
    """Every account of one snapshot by name, each ``Account`` built when first read: a replay
    builds a snapshot per cycle and most cycles read no account or a few (issue 24 item 2: one
    object per account per cycle was 6 % of ``fifo``'s replay of 100,000 synthetic jobs)."""

    __slots__ = ("_built", "_names", "_usage")

    def __init__(self, names: frozenset[str], usage: _Usage) -> None:
        self._names, self._usage = names, usage
        self._built: dict[str, Account] = {}

    def __getitem__(self, name: str) -> Account:
        account = self._built.get(name)
        if account is None:
            if name not in self._names:
                raise KeyError(name)
            account = self._built[name] = _new(_LazyAccount)
            _put(account, "__dict__", {"name": name, "share": 1.0, "quota_gpus": None, "_usage": self._usage})
        return account

    def get(self, name: str, default: Any = None) -> Any:  # (Mapping's goes through KeyError)
        return self[name] if name in self._names else default

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names))  # the eager mapping's order

    def __len__(self) -> int:
        return len(self._names)


def lazy_accounts(done: Mapping[str, float], running: Mapping[str, Any], held: Mapping[str, int],
                  now: float, recent: DecayedUse | None = None) -> Mapping[str, Account]:
    """Every account that used GPUs (``done``) or holds some now (``held``), by name, read only,
    each with the usage the eager snapshot summed as of ``now`` (``running``: the backend's jobs,
    fresh views), summed only if a policy reads it (fair-share policies do), and each built only
    when read."""
    return MappingProxyType(_LazyAccounts(frozenset(done.keys() | held.keys()),
                                          _Usage(dict(done), list(map(_VIEW, running.values())), now,
                                                 recent)))


def eager_accounts(done: Mapping[str, float], running: Mapping[str, Any],
                   base: Mapping[str, Account], now: float,
                   recent: DecayedUse | None = None, shown: Iterable[RunningJob] = ()) -> dict[str, Account]:
    """Accounts with their usage as of ``now`` summed at once, over ``base``'s shares and quotas
    (a loaded snapshot's, for an estimate; ``running``: the backend's jobs; ``shown``: their
    views, for the fair-share input)."""
    usage = dict(done)
    for sj in running.values():
        acc = sj.tj.account
        usage[acc] = usage.get(acc, 0.0) + sj.attained_at(now) - sj.attained_at_start
    fair = recent_use(recent, list(shown), now)
    return {a: Account(a, base[a].share, u, base[a].quota_gpus, fair.get(a, 0.0)) if a in base
            else Account(a, usage_gpu_s=u, recent_gpu_s=fair.get(a, 0.0))
            for a, u in sorted(usage.items())}


def frozen_free(free: Mapping[str, set[int]], nodes: Mapping[str, Node],
                away: set[str]) -> dict[str, frozenset[int]]:
    """The free GPUs a snapshot shows: usable nodes that are not away (reclaimed spot nodes),
    sorted."""
    return {node: frozenset(gpus) for node, gpus in sorted(free.items())
            if nodes[node].state.usable and node not in away}


def _bump(table: dict[Any, int], key: Any, step: int) -> None:
    n = table.get(key, 0) + step
    if n:
        table[key] = n
    else:
        del table[key]


class QueueFacts:
    """``SnapshotIndex.queue`` of the waiting jobs, kept as they enter and leave the queue: how
    many there are of each (class, after a fault) (``QueueSummary``;
    ``tests/daemon/sim/test_backend_shared.py`` compares it with a walk of the queue at every
    cycle)."""

    def __init__(self) -> None:
        self._kinds: dict[tuple[int, bool], int] = {}
        self._summary: QueueSummary | None = None

    def add(self, job: Job) -> None:
        self._count(job, 1)

    def remove(self, job: Job) -> None:
        self._count(job, -1)

    def _count(self, job: Job, step: int) -> None:
        _bump(self._kinds, (int(job.priority_class), job.state.after_fault), step)
        self._summary = None

    def summary(self) -> QueueSummary:
        if self._summary is None:
            self._summary = QueueSummary(len(self._kinds))
        return self._summary


class SubmitOrder:
    """``plan.rigid_by_submit`` of the queue, kept: a job's ``Want`` at its requested size,
    ordered by (submit time, job id), inserted as it enters the queue and removed as it leaves."""

    def __init__(self) -> None:
        self._keys: list[tuple[float, str]] = []
        self._wants: list[Want] = []
        self._view: tuple[Want, ...] | None = None

    def add(self, r: JobRequest) -> None:
        key = (r.submit_time, r.job_id)
        i = bisect.bisect_left(self._keys, key)
        self._keys.insert(i, key)
        self._wants.insert(i, Want(r.job_id, r.replicas, r.replicas))
        self._view = None

    def remove(self, r: JobRequest) -> None:
        key = (r.submit_time, r.job_id)
        i = bisect.bisect_left(self._keys, key)
        if i < len(self._keys) and self._keys[i] == key:
            del self._keys[i], self._wants[i]
            self._view = None

    def view(self) -> tuple[Want, ...]:
        if self._view is None:
            self._view = tuple(self._wants)
        return self._view


def fabric_node(facts: Any, tier: str) -> Node:
    """The core's node for a fabric node: its GPU facts and capacity tier."""
    return Node(facts.name, facts.gpus, tier=tier,
                facts=GpuFacts(gpu_type=facts.gpu_type, gpu_mem_gb=facts.gpu_mem_gb,
                               nvlink=facts.nvlink))


__all__ = ["Line", "LiveRunning", "QueueFacts", "RunningShown", "SubmitOrder", "all_fresh", "attained", "eager_accounts", "fabric_node",
           "frozen_free", "lazy_accounts", "patched_views", "sorted_views", "work_left"]
