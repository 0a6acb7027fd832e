"""The action journal, the cycle log and the leader record.

The daemon writes every action ``planned`` and commits *before* sending it, then ``applied`` or
``failed`` with Slurm's answer; reconciliation settles entries left ``planned`` by a crash as
``applied`` or ``abandoned``. The idempotency key is ``sha256(cycle id, kind, payload)``: the same
action cannot be journaled twice for one cycle, and a backend may use it to recognise a resend.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from railgang.db.models import JOURNAL_STATES, DaemonCycle, DaemonLeader, JournalEntry

SETTLED = ("applied", "failed", "abandoned")


@dataclass(frozen=True, slots=True)
class PlannedRow:
    """One action as the journal stores it (the service turns core actions into these)."""

    kind: str
    payload: str  # canonical JSON (sorted keys, no spaces)
    job_id: str | None = None
    node: str | None = None


def idempotency_key(cycle_id: int, kind: str, payload: str) -> str:
    return hashlib.sha256(f"{cycle_id}\x1f{kind}\x1f{payload}".encode()).hexdigest()


# -- cycles ------------------------------------------------------------------------------------
def begin_cycle(s: Session, *, started_at: datetime, leader: str, policy: str) -> DaemonCycle:
    cycle = DaemonCycle(started_at=started_at, leader=leader, policy=policy, pending=0,
                        running=0, actions=0, failed=0, timings="{}")
    s.add(cycle)
    s.flush()  # assigns the id the journal rows refer to
    return cycle


def finish_cycle(s: Session, cycle: DaemonCycle, *, finished_at: datetime, pending: int,
                 running: int, actions: int, failed: int, timings: Mapping[str, float],
                 error: str | None = None) -> None:
    cycle.finished_at = finished_at
    cycle.pending, cycle.running, cycle.actions, cycle.failed = pending, running, actions, failed
    cycle.timings = json.dumps({k: round(v, 3) for k, v in timings.items()}, sort_keys=True)
    cycle.error = None if error is None else error[:512]


def last_cycle(s: Session, *, finished: bool = True) -> DaemonCycle | None:
    q = select(DaemonCycle)
    if finished:
        q = q.where(DaemonCycle.finished_at.is_not(None))
    return s.scalars(q.order_by(DaemonCycle.id.desc()).limit(1)).first()


# -- journal -----------------------------------------------------------------------------------
def add_planned(s: Session, cycle_id: int, rows: Sequence[PlannedRow],
                at: datetime, *, first_seq: int = 0) -> list[JournalEntry]:
    """``rows`` as ``planned`` entries of the cycle, numbered from ``first_seq`` in apply order
    (a backend's follow-ups, done while it observed, come before the cycle's actions: < 0)."""
    entries = [
        JournalEntry(cycle_id=cycle_id, seq=first_seq + i, kind=r.kind, job_id=r.job_id, node=r.node,
                     payload=r.payload, idem_key=idempotency_key(cycle_id, r.kind, r.payload),
                     state="planned", detail="", planned_at=at)
        for i, r in enumerate(rows)
    ]
    s.add_all(entries)
    s.flush()
    return entries


def settle(s: Session, entries: Sequence[JournalEntry], outcomes: Sequence[tuple[str, str]],
           at: datetime) -> None:
    """Give each entry its outcome ``(state, detail)``, in the same order."""
    if len(entries) != len(outcomes):
        raise ValueError(f"{len(entries)} journal entries but {len(outcomes)} outcomes")
    for entry, (state, detail) in zip(entries, outcomes, strict=True):
        if state not in SETTLED:
            raise ValueError(f"cannot settle a journal entry as {state!r}")
        entry.state, entry.detail, entry.settled_at = state, detail[:512], at


def open_entries(s: Session) -> list[JournalEntry]:
    """Entries still ``planned``: sent (or about to be) when the daemon stopped, outcome unknown."""
    q = select(JournalEntry).where(JournalEntry.state == "planned").order_by(JournalEntry.id)
    return list(s.scalars(q))


def applied_since(s: Session, kinds: Sequence[str], since: datetime) -> list[JournalEntry]:
    """Entries of ``kinds`` that the cluster accepted (``applied``), planned at or after ``since``,
    oldest first."""
    q = (select(JournalEntry).where(JournalEntry.state == "applied", JournalEntry.kind.in_(kinds),
                                    JournalEntry.planned_at >= since)
         .order_by(JournalEntry.planned_at, JournalEntry.id))
    return list(s.scalars(q))


def entries_of_cycle(s: Session, cycle_id: int) -> list[JournalEntry]:
    q = select(JournalEntry).where(JournalEntry.cycle_id == cycle_id).order_by(JournalEntry.seq)
    return list(s.scalars(q))


def counts_by_state(s: Session) -> dict[str, int]:
    rows = s.execute(select(JournalEntry.state, func.count()).group_by(JournalEntry.state))
    counts = dict.fromkeys(JOURNAL_STATES, 0)
    counts.update({state: int(n) for state, n in rows})
    return counts


def prune(s: Session, *, settled_before: datetime, keep_cycles: int) -> None:
    """Bound the tables: settled journal entries older than the cutoff, and all but the newest
    ``keep_cycles`` cycle rows, go. ``planned`` entries are never pruned."""
    s.execute(delete(JournalEntry).where(JournalEntry.state != "planned",
                                         JournalEntry.settled_at < settled_before))
    newest = s.scalars(select(DaemonCycle.id).order_by(DaemonCycle.id.desc())
                       .offset(keep_cycles).limit(1)).first()
    if newest is not None:
        s.execute(delete(DaemonCycle).where(DaemonCycle.id <= newest))


# -- leader ------------------------------------------------------------------------------------
def set_leader(s: Session, *, host: str, pid: int, acquired_at: datetime, backend: str,
               policy: str) -> None:
    row = s.get(DaemonLeader, 1)
    if row is None:
        s.add(DaemonLeader(id=1, host=host, pid=pid, acquired_at=acquired_at, backend=backend,
                           policy=policy))
        return
    row.host, row.pid, row.acquired_at, row.backend, row.policy = (
        host, pid, acquired_at, backend, policy)


def get_leader(s: Session) -> DaemonLeader | None:
    return s.get(DaemonLeader, 1)



__all__ = [
    "SETTLED",
    "PlannedRow",
    "add_planned",
    "applied_since",
    "begin_cycle",
    "counts_by_state",
    "entries_of_cycle",
    "finish_cycle",
    "get_leader",
    "idempotency_key",
    "last_cycle",
    "open_entries",
    "prune",
    "set_leader",
    "settle",
]
