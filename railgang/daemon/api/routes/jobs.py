"""Jobs as the daemon last explained them (db.repositories.explanations, written each cycle)."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Path, Query
from sqlalchemy import func, select

from railgang.daemon.api import messages
from railgang.daemon.api.deps import CurrentToken, PageDep, SessionDep, require_read
from railgang.daemon.api.schemas import JobOut, PageOf
from railgang.db.models import JobExplanation
from railgang.db.repositories import explanations
from railgang.errors import NotFoundError

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def _out(e: JobExplanation) -> JobOut:
    try:
        data = json.loads(e.data or "{}")
    except json.JSONDecodeError:
        data = {}
    return JobOut(job_id=e.job_id, state=e.state, account=e.account,
                  priority_class=e.priority_class, gpus=e.gpus, reason=e.reason,
                  detail=e.detail, position=e.position, queue_length=e.queue_length,
                  nodes=e.nodes, updated_at=e.updated_at,
                  data=data if isinstance(data, dict) else {"value": data})


@router.get("", response_model=PageOf[JobOut])
def list_jobs(session: SessionDep, principal: CurrentToken, page: PageDep,
              state: Annotated[str | None, Query(pattern="^(waiting|running|gone)$")] = None,
              account: Annotated[str | None, Query(max_length=64)] = None) -> PageOf[JobOut]:
    """Jobs the daemon knows, waiting ones in queue order."""
    q = select(JobExplanation)
    if account is not None:
        require_read(principal, account)
        q = q.where(JobExplanation.account == account)
    elif not principal.is_admin:
        q = q.where(JobExplanation.account.in_(sorted(principal.teams)))
    if state is not None:
        q = q.where(JobExplanation.state == state)
    total = session.scalar(select(func.count()).select_from(q.subquery())) or 0
    rows = session.scalars(q.order_by(JobExplanation.position.is_(None),
                                      JobExplanation.position, JobExplanation.job_id)
                           .limit(page.limit).offset(page.offset))
    return PageOf[JobOut](items=[_out(e) for e in rows], total=total, limit=page.limit,
                          offset=page.offset)


@router.get("/{job_id}", response_model=JobOut)
def explain(job_id: Annotated[str, Path(max_length=32)], session: SessionDep,
            principal: CurrentToken) -> JobOut:
    """Why a job waits (reason, blockers, place in the queue) or where it runs."""
    e = explanations.get(session, job_id)
    if e is None:
        raise NotFoundError(messages.NO_EXPLANATION.format(job=job_id),
                            fields={"job_id": "unknown"})
    require_read(principal, e.account)
    return _out(e)
