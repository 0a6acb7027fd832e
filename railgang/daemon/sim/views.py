"""What the simulator's snapshots share from cycle to cycle (issue 12, speed).

A replay hands the decision core a snapshot at every cycle, and most of the cluster does not
change between two of them. The pieces here let ``SimBackend.snapshot`` cost what changed:

- :class:`LiveJob` — a running job whose state (attained service, work left) is computed as of
  its :class:`Now`'s time when it is read, from the job's progress line as of its last change.
  Its ``RunningJob`` view is kept from snapshot to snapshot while the job does not change
  (``SimJob.running_view``); the core reads the state of few running jobs per cycle.
- :func:`sorted_views` — the running mapping by job id, built from the kept views in C loops.
- :func:`lazy_accounts` — accounts whose usage is summed when first read (only fair-share
  policies read it).

Every number is computed by the arithmetic and in the order the eager code used, so the floats
and the schedules are the same (the identical ``--json`` check in BENCHMARKS).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from railgang.daemon.core.model.job import Job, JobState, RunningJob
from railgang.daemon.core.model.snapshot import Account, Node

Line = tuple[JobState, float, float, int, float, float | None, float | None, float, float]
"""A running job's progress line as of its last change: its state then (preemptions), GPU-s
attained, the time of that, GPUs, service per GPU-second, work left (None: not told), moving
after (None: stopped), work rate, GPU-s attained when this run began."""

_new, _put = object.__new__, object.__setattr__
_VIEW = attrgetter("view")


class Now:
    """The time of the backend's latest snapshot, read by the running views built for it.

    Views are kept from snapshot to snapshot while their job does not change, and this one
    object moves on with the snapshots; the backend starts a new one when an older snapshot is
    still held somewhere, so that one keeps reading its own time (``SimBackend.snapshot``)."""

    __slots__ = ("t", "usage")

    def __init__(self, t: float) -> None:
        self.t = t
        self.usage: _Usage | None = None  # the accounts' usage as of ``t`` (lazy_accounts)


def attained(line: Line, now: float) -> float:
    """GPU-seconds attained as of ``now`` (``SimJob.progress_at``'s arithmetic)."""
    dt = now - line[2]
    return line[1] + line[3] * (dt if dt > 0.0 else 0.0) * line[4]


class LiveJob(Job):
    """A running job as of its clock's time (see the module docstring). Built only through
    :meth:`of`; reads as a plain :class:`Job`."""

    __slots__ = ("_at", "_state", "clock", "line")
    line: Line
    clock: Now
    _at: float  # the time ``_state`` is as of (NaN: none yet)
    _state: JobState

    @classmethod
    def of(cls, job: Job, clock: Now, line: Line) -> LiveJob:
        live = _new(cls)
        _put(live, "request", job.request)
        _put(live, "clock", clock)
        _put(live, "line", line)
        _put(live, "_at", math.nan)
        return live

    @property  # the field ``state``, computed when read at a new time
    def state(self) -> JobState:
        now = self.clock.t
        if self._at == now:
            return self._state
        line = self.line
        old, _, as_of, _, _, remaining, busy_until, rate, _ = line
        if remaining is not None and busy_until is not None:  # oracle, not stopped
            moving_since = as_of if as_of > busy_until else busy_until
            if now > moving_since:
                remaining = max(0.0, remaining - rate * (now - moving_since))
        state = JobState(attained(line, now), remaining, old.preemptions, old.last_preempted_at)
        _put(self, "_state", state)
        _put(self, "_at", now)
        return state


def sorted_views(running: Mapping[str, Any], ids: list[str]) -> Mapping[str, RunningJob]:
    """The kept views of ``running`` (job id -> a job with a fresh ``view``) in the order of
    ``ids`` (its keys, sorted)."""
    return MappingProxyType(dict(zip(ids, map(_VIEW, map(running.__getitem__, ids)), strict=True)))


def all_fresh(running: Mapping[str, Any]) -> bool:
    """Every running job still has its view (none changed since it was built)."""
    return all(map(_VIEW, running.values()))


class _Usage:
    """Each account's GPU-seconds as of one snapshot, summed when first read: what finished
    runs used, plus each running job's service in this run (in the backend's order of its
    running jobs, as the eager sum went)."""

    __slots__ = ("_done", "_now", "_table", "_views")

    def __init__(self, done: dict[str, float], views: list[RunningJob], now: float) -> None:
        self._done, self._views, self._now = done, views, now
        self._table: dict[str, float] | None = None

    def of(self, account: str) -> float:
        table = self._table
        if table is None:
            table = self._table = self._done
            now = self._now
            for view in self._views:
                line: Line = view.job.line  # type: ignore[attr-defined]
                acc = view.job.request.account
                table[acc] = table.get(acc, 0.0) + attained(line, now) - line[8]
        return table.get(account, 0.0)


class _LazyAccount(Account):
    """An account whose ``usage_gpu_s`` is read from its clock's :class:`_Usage` (the same
    object serves every snapshot of that clock, as the running views do)."""

    @property  # the field, summed on first read
    def usage_gpu_s(self) -> float:
        clock: Now = self.__dict__["_clock"]
        assert clock.usage is not None
        return clock.usage.of(self.name)


def lazy_accounts(done: Mapping[str, float], running: Mapping[str, Any], held: Mapping[str, int],
                  clock: Now, kept: Mapping[str, Account] | None) -> Mapping[str, Account]:
    """Every account that used GPUs (``done``) or holds some now (``held``), by name, read only,
    each with the usage the eager snapshot summed as of ``clock.t`` (``running``: the backend's
    jobs, fresh views). ``kept``: the last answer, returned again if it has the same accounts
    on the same clock."""
    clock.usage = _Usage(dict(done), list(map(_VIEW, running.values())), clock.t)
    names = done.keys() | held.keys()
    if kept is not None and kept.keys() == names and all(
            a.__dict__["_clock"] is clock for a in list(kept.values())[:1]):
        return kept
    out: dict[str, Account] = {}
    for name in sorted(names):
        account = _new(_LazyAccount)
        _put(account, "__dict__", {"name": name, "share": 1.0, "quota_gpus": None,
                                   "_clock": clock})
        out[name] = account
    return MappingProxyType(out)


def eager_accounts(done: Mapping[str, float], running: Mapping[str, Any],
                   base: Mapping[str, Account], now: float) -> dict[str, Account]:
    """Accounts with their usage as of ``now`` summed at once, over ``base``'s shares and quotas
    (a loaded snapshot's, for an estimate; ``running``: the backend's jobs)."""
    usage = dict(done)
    for sj in running.values():
        acc = sj.tj.account
        usage[acc] = usage.get(acc, 0.0) + sj.attained_at(now) - sj.attained_at_start
    return {a: Account(a, base[a].share, u, base[a].quota_gpus) if a in base
            else Account(a, usage_gpu_s=u) for a, u in sorted(usage.items())}


def frozen_free(free: Mapping[str, set[int]], nodes: Mapping[str, Node],
                away: set[str]) -> dict[str, frozenset[int]]:
    """The free GPUs a snapshot shows: usable nodes that are not away (reclaimed spot nodes),
    sorted."""
    return {node: frozenset(gpus) for node, gpus in sorted(free.items())
            if nodes[node].state.usable and node not in away}


__all__ = ["Line", "LiveJob", "Now", "all_fresh", "attained", "eager_accounts", "frozen_free",
           "lazy_accounts", "sorted_views"]
