"""Priority classes and their grants, rates, and quota events (borrow, reclaim, use-it-or-lose-it
proposals with the admin's decision). Every change is audited; nothing here commits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from railgang.db.models import Account
from railgang.db.org import (
    CAPACITY_TIERS,
    EVENT_KINDS,
    GRANT_KINDS,
    ClassGrant,
    PriorityClass,
    QuotaEvent,
    Rate,
)
from railgang.db.repositories import audit
from railgang.db.repositories.org import get_account
from railgang.errors import ConflictError, NotFoundError, ValidationFailed


def classes(s: Session) -> list[PriorityClass]:
    return list(s.scalars(select(PriorityClass).order_by(PriorityClass.id)))


def get_class(s: Session, class_id: int) -> PriorityClass:
    pc = s.get(PriorityClass, class_id)
    if pc is None:
        raise NotFoundError(f"no priority class {class_id}", fields={"class_id": "0..3"})
    return pc


def grants(s: Session, class_id: int | None = None) -> list[ClassGrant]:
    q = select(ClassGrant).order_by(ClassGrant.class_id, ClassGrant.kind, ClassGrant.subject)
    if class_id is not None:
        q = q.where(ClassGrant.class_id == class_id)
    return list(s.scalars(q))


def grant(s: Session, *, actor: str, class_id: int, kind: str, subject: str) -> ClassGrant:
    pc = get_class(s, class_id)
    if kind not in GRANT_KINDS:
        raise ValidationFailed("unknown grant kind", fields={"kind": "account, user or qos"})
    if not pc.needs_grant:
        raise ValidationFailed(f"class {class_id} ({pc.name}) needs no grant",
                               fields={"class_id": "anyone may use this class"})
    if kind == "account":
        get_account(s, subject)
    if s.scalars(select(ClassGrant).where(ClassGrant.class_id == class_id,
                                          ClassGrant.kind == kind,
                                          ClassGrant.subject == subject)).first():
        raise ConflictError("already granted", fields={"subject": f"{kind} {subject} has it"})
    g = ClassGrant(class_id=class_id, kind=kind, subject=subject, granted_by=actor,
                   created_at=datetime.now(UTC))
    s.add(g)
    audit.record(s, actor=actor, action="class.grant", target=f"class:{class_id}",
                 before=None, after={"kind": kind, "subject": subject})
    return g


def revoke_grant(s: Session, *, actor: str, grant_id: int) -> None:
    g = s.get(ClassGrant, grant_id)
    if g is None:
        raise NotFoundError(f"no grant {grant_id}", fields={"grant_id": "unknown"})
    audit.record(s, actor=actor, action="class.revoke", target=f"class:{g.class_id}",
                 before={"kind": g.kind, "subject": g.subject}, after=None)
    s.delete(g)


def rates(s: Session) -> list[Rate]:
    return list(s.scalars(select(Rate).order_by(Rate.gpu_type, Rate.capacity)))


def set_rate(s: Session, *, actor: str, gpu_type: str, capacity: str, per_gpu_hour: float,
             currency: str = "USD") -> Rate:
    if capacity not in CAPACITY_TIERS:
        raise ValidationFailed("unknown capacity tier",
                               fields={"capacity": ", ".join(CAPACITY_TIERS)})
    if per_gpu_hour < 0:
        raise ValidationFailed("negative rate", fields={"per_gpu_hour": "must be >= 0"})
    row = s.scalars(select(Rate).where(Rate.gpu_type == gpu_type,
                                       Rate.capacity == capacity)).one_or_none()
    before = None if row is None else {"per_gpu_hour": row.per_gpu_hour,
                                       "currency": row.currency}
    if row is None:
        row = Rate(gpu_type=gpu_type, capacity=capacity)
        s.add(row)
    row.per_gpu_hour, row.currency = per_gpu_hour, currency
    audit.record(s, actor=actor, action="rate.set", target=f"rate:{gpu_type}:{capacity}",
                 before=before, after={"per_gpu_hour": per_gpu_hour, "currency": currency})
    return row


def event_dict(e: QuotaEvent, account: str) -> dict[str, Any]:
    return {"id": e.id, "kind": e.kind, "state": e.state, "account": account,
            "gpu_type": e.gpu_type, "gpus": e.gpus, "detail": e.detail,
            "created_at": e.created_at, "decided_at": e.decided_at, "decided_by": e.decided_by}


def add_event(s: Session, *, actor: str, kind: str, account: str, gpus: int,
              gpu_type: str = "*", detail: str = "") -> QuotaEvent:
    """Record a borrow or reclaim (``recorded``) or propose a use-it-or-lose-it cut
    (``proposed``, waiting for an admin's decision)."""
    if kind not in EVENT_KINDS:
        raise ValidationFailed("unknown event kind", fields={"kind": ", ".join(EVENT_KINDS)})
    acc = get_account(s, account)
    state = "proposed" if kind in ("lose-proposal", "restore") else "recorded"
    e = QuotaEvent(kind=kind, state=state, account_id=acc.id, gpu_type=gpu_type, gpus=gpus,
                   detail=detail[:512], created_at=datetime.now(UTC))
    s.add(e)
    s.flush()
    audit.record(s, actor=actor, action=f"event.{kind}", target=f"event:{e.id}", before=None,
                 after=event_dict(e, account))
    return e


def decide_event(s: Session, *, actor: str, event_id: int, approve: bool) -> QuotaEvent:
    e = s.get(QuotaEvent, event_id)
    if e is None:
        raise NotFoundError(f"no quota event {event_id}", fields={"event_id": "unknown"})
    if e.state != "proposed":
        raise ConflictError(f"event {event_id} is {e.state}, not proposed",
                            fields={"state": "only proposals are decided"})
    acc_name = s.get_one(Account, e.account_id).name
    before = event_dict(e, acc_name)
    e.state = "approved" if approve else "rejected"
    e.decided_at, e.decided_by = datetime.now(UTC), actor
    audit.record(s, actor=actor, action="event.decide", target=f"event:{e.id}", before=before,
                 after=event_dict(e, acc_name))
    return e


def grants_file_text(s: Session) -> str:
    """The local grants file job_submit.lua reads: one ``class kind subject`` per line, and one
    ``limit class seconds`` line per class with a time limit. Sorted, so the same grants give
    the same bytes (the daemon rewrites the file only when they change)."""
    lines = ["# railgang class grants: written by the daemon, read by job_submit.lua"]
    for pc in classes(s):
        if pc.max_time_s is not None:
            lines.append(f"limit {pc.id} {pc.max_time_s}")
        if not pc.needs_grant:
            lines.append(f"open {pc.id}")
    lines += [f"{g.class_id} {g.kind} {g.subject}" for g in grants(s)]
    return "\n".join(lines) + "\n"


__all__ = ["add_event", "classes", "decide_event", "event_dict", "get_class", "grant",
           "grants", "grants_file_text", "rates", "revoke_grant", "set_rate"]
