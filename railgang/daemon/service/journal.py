"""The daemon's :class:`~railgang.daemon.loop.CycleJournal`: the action journal in the database.

It owns the cycle's transaction points (repositories never commit): the reconciliation of what
an earlier cycle left open is committed before the core decides, the ``planned`` rows are
committed before the backend sends anything, and the outcomes are committed as soon as the
backend answered. A crash at any point therefore leaves either nothing or ``planned`` rows, which
the next cycle settles from Slurm (``reconcile.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from railgang.daemon.backend import ActionResult, Backend, FollowUp
from railgang.daemon.core.model.actions import Action, Migrate, Preempt
from railgang.daemon.core.model.snapshot import PreemptEvent, Snapshot
from railgang.daemon.service import codec
from railgang.daemon.service.reconcile import OpenEntry, Verdict, reconcile
from railgang.db.models import JournalEntry
from railgang.db.repositories import journal as repo


def utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def open_entries(entries: Sequence[JournalEntry]) -> list[OpenEntry]:
    out = []
    for e in entries:
        try:
            out.append(OpenEntry(e.id, codec.decode(e.kind, e.payload)))
        except codec.PayloadError as exc:
            out.append(OpenEntry(e.id, None, str(exc)))
    return out


HISTORY_S = 3600.0  # preemption history a snapshot carries (the simulator's preempt_window_s)


def preemption_history(session: Session, now: float, window_s: float = HISTORY_S,
                       ) -> tuple[PreemptEvent, ...]:
    """The preemptions and migrations the cluster accepted in the last ``window_s``, as the
    core's churn budget counts them (``Snapshot.preemptions``): Slurm shows none, so without
    these the churn cap and its burst would bound one cycle only, and a restarted daemon would
    start with a fresh budget. Time: when the action was planned (its signal went out then);
    GPUs: what the victim held. A row whose payload no longer decodes is left out."""
    since = utc(now - window_s)
    out = []
    for row in repo.applied_since(session, ("preempt", "migrate"), since):
        try:
            action = codec.decode(row.kind, row.payload)
        except codec.PayloadError:
            continue
        if isinstance(action, Preempt | Migrate) and action.gpus > 0:
            out.append(PreemptEvent(row.planned_at.timestamp(), action.job_id, action.gpus))
    return tuple(out)


class SessionJournal:
    """Journal of one cycle (``cycle_id``) on one session; ``backend`` resends idempotent work."""

    def __init__(self, session: Session, cycle_id: int, backend: Backend) -> None:
        self.session = session
        self.cycle_id = cycle_id
        self.backend = backend
        self.entries: list[JournalEntry] = []
        self.reconciled: Counter[str] = Counter()  # verdicts on entries earlier cycles left open
        self.outcomes: Counter[tuple[str, str]] = Counter()  # (kind, applied|failed|abandoned)

    # -- CycleJournal ----------------------------------------------------------------------------
    def observed(self, snapshot: Snapshot, now: float) -> None:
        s = self.session
        rows = repo.open_entries(s)
        if not rows:
            return
        by_id = {r.id: r for r in rows}
        decoded = open_entries(rows)
        actions = {o.entry_id: o.action for o in decoded}
        settled: list[tuple[JournalEntry, tuple[str, str]]] = []
        resend: list[tuple[JournalEntry, Action]] = []
        for st in reconcile(decoded, snapshot):
            row = by_id[st.entry_id]
            self.reconciled[st.verdict.value] += 1
            action = actions[st.entry_id]
            if st.verdict is Verdict.RESEND and action is not None:
                resend.append((row, action))
            else:
                settled.append((row, (st.verdict.value, f"reconciled: {st.detail}")))
        if resend:
            results = self.backend.apply([a for _, a in resend], now)
            settled += [(row, ("applied" if r.ok else "failed", f"resent: {r.detail}".rstrip(": ")))
                        for (row, _), r in zip(resend, results, strict=True)]
        for row, (state, _detail) in settled:
            self.outcomes[(row.kind, state)] += 1
        repo.settle(s, [r for r, _ in settled], [o for _, o in settled], utc(now))
        s.commit()

    def planned(self, actions: Sequence[Action], now: float) -> None:
        rows = []
        for a in actions:
            job_id, node = codec.subject(a)
            rows.append(repo.PlannedRow(codec.kind_of(a), codec.encode(a), job_id, node))
        self.entries = repo.add_planned(self.session, self.cycle_id, rows, utc(now))
        self.session.commit()  # durable before anything is sent

    def followed_up(self, steps: Sequence[FollowUp], now: float) -> None:
        """Record the steps the backend took on its own while observing (second phases of earlier
        actions), settled at once: they were carried out before the journal heard of them."""
        if not steps:
            return
        rows = [repo.PlannedRow(f.step, json.dumps({"job_id": f.job_id, "step": f.step},
                                                   sort_keys=True), f.job_id, None) for f in steps]
        entries = repo.add_planned(self.session, self.cycle_id, rows, utc(now), first_seq=-len(rows))
        outcomes = [("applied" if f.ok else "failed", f.detail) for f in steps]
        repo.settle(self.session, entries, outcomes, utc(now))
        for e, (state, _) in zip(entries, outcomes, strict=True):
            self.outcomes[(e.kind, state)] += 1
        self.session.commit()

    def settled(self, results: Sequence[ActionResult], now: float) -> None:
        outcomes = [("applied" if r.ok else "failed", r.detail) for r in results]
        repo.settle(self.session, self.entries, outcomes, utc(now))
        for e, (state, _) in zip(self.entries, outcomes, strict=True):
            self.outcomes[(e.kind, state)] += 1
        self.session.commit()


__all__ = ["HISTORY_S", "SessionJournal", "open_entries", "preemption_history", "utc"]
