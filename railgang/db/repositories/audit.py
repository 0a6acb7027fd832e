"""The audit log: every admin change with who made it and the object before and after."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railgang.db.org import AuditEntry


def _dump(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def record(s: Session, *, actor: str, action: str, target: str,
           before: dict[str, Any] | None, after: dict[str, Any] | None,
           at: datetime | None = None) -> AuditEntry:
    entry = AuditEntry(at=at or datetime.now(UTC), actor=actor[:64], action=action[:32],
                       target=target[:128], before=_dump(before), after=_dump(after))
    s.add(entry)
    return entry


def page(s: Session, *, limit: int, offset: int) -> tuple[int, list[AuditEntry]]:
    total = s.scalar(select(func.count()).select_from(AuditEntry)) or 0
    rows = s.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
                     .offset(offset)).all()
    return total, list(rows)


__all__ = ["page", "record"]
