"""Priority classes and their grants, rates, and quota events with approve/reject."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from sqlalchemy import select

from railgang.daemon.api import messages
from railgang.daemon.api.deps import (
    AdminToken,
    CurrentToken,
    PageDep,
    SessionDep,
    require_read,
    require_write,
)
from railgang.daemon.api.schemas import (
    GPU_TYPE,
    ClassOut,
    EventIn,
    EventOut,
    GrantIn,
    GrantOut,
    PageOf,
    RateIn,
    RateOut,
)
from railgang.db.models import Account
from railgang.db.org import QuotaEvent
from railgang.db.repositories import admin as repo
from railgang.errors import PermissionDeniedError

router = APIRouter(prefix="/v1", tags=["classes, rates and quota events"])

ClassId = Annotated[int, Path(ge=0, le=3)]


@router.get("/classes", response_model=list[ClassOut])
def classes(session: SessionDep, _: CurrentToken) -> list[ClassOut]:
    return [ClassOut(id=c.id, name=c.name, preemptible=c.preemptible, max_time_s=c.max_time_s,
                     needs_grant=c.needs_grant, description=c.description)
            for c in repo.classes(session)]


def _grant(g: object) -> GrantOut:
    return GrantOut.model_validate(g, from_attributes=True)


@router.get("/classes/{class_id}/grants", response_model=list[GrantOut])
def grants(class_id: ClassId, session: SessionDep, _: AdminToken) -> list[GrantOut]:
    repo.get_class(session, class_id)
    return [_grant(g) for g in repo.grants(session, class_id)]


@router.post("/classes/{class_id}/grants", status_code=201, response_model=GrantOut)
def grant(class_id: ClassId, body: GrantIn, session: SessionDep, admin: AdminToken) -> GrantOut:
    """Allow an account, user or QOS to submit in class 0, 1 or 2."""
    g = repo.grant(session, actor=admin.name, class_id=class_id, kind=body.kind,
                   subject=body.subject)
    session.flush()
    return _grant(g)


@router.delete("/grants/{grant_id}", status_code=204)
def revoke_grant(grant_id: Annotated[int, Path(ge=1, le=2**31 - 1)], session: SessionDep,
                 admin: AdminToken) -> Response:
    repo.revoke_grant(session, actor=admin.name, grant_id=grant_id)
    return Response(status_code=204)


@router.get("/rates", response_model=list[RateOut])
def rates(session: SessionDep, _: CurrentToken) -> list[RateOut]:
    return [RateOut(gpu_type=r.gpu_type, capacity=r.capacity, per_gpu_hour=r.per_gpu_hour,
                    currency=r.currency) for r in repo.rates(session)]


@router.put("/rates/{gpu_type}/{capacity}", response_model=RateOut)
def set_rate(gpu_type: Annotated[str, Path(pattern=GPU_TYPE)],
             capacity: Annotated[str, Path(pattern="^(reserved|on-demand|spot|borrowed)$")],
             body: RateIn, session: SessionDep, admin: AdminToken) -> RateOut:
    r = repo.set_rate(session, actor=admin.name, gpu_type=gpu_type, capacity=capacity,
                      per_gpu_hour=body.per_gpu_hour, currency=body.currency)
    return RateOut(gpu_type=r.gpu_type, capacity=r.capacity, per_gpu_hour=r.per_gpu_hour,
                   currency=r.currency)


@router.get("/quota-events", response_model=PageOf[EventOut])
def events(session: SessionDep, principal: CurrentToken, page: PageDep,
           account: Annotated[str | None, Query(max_length=64)] = None,
           state: Annotated[str | None, Query(pattern="^(recorded|proposed|approved|rejected)$")]
           = None) -> PageOf[EventOut]:
    """Borrow/reclaim records and use-it-or-lose-it proposals, newest first."""
    if account is not None:
        require_read(principal, account)
    q = (select(QuotaEvent, Account.name).join(Account, Account.id == QuotaEvent.account_id)
         .order_by(QuotaEvent.id.desc()))
    if account is not None:
        q = q.where(Account.name == account)
    elif not principal.is_admin:
        q = q.where(Account.name.in_(sorted(principal.teams)))
    if state is not None:
        q = q.where(QuotaEvent.state == state)
    rows = session.execute(q).all()
    items = [EventOut(**repo.event_dict(e, name))
             for e, name in rows[page.offset:page.offset + page.limit]]
    return PageOf[EventOut](items=items, total=len(rows), limit=page.limit, offset=page.offset)


@router.post("/quota-events", status_code=201, response_model=EventOut)
def add_event(body: EventIn, session: SessionDep, principal: CurrentToken) -> EventOut:
    """Record a borrow/reclaim or propose a restore (admin, or the team's team-admin for its own
    team) or a use-it-or-lose-it cut (admin only); proposals wait for an admin's approve/reject."""
    require_write(principal, body.account)
    if body.kind == "lose-proposal" and not principal.is_admin:
        # a lose-proposal, even a rejected one, pauses the daemon's review of that team for the
        # review window: a team must not be able to switch off its own review
        raise PermissionDeniedError(messages.LOSE_PROPOSAL_ADMIN_ONLY)
    e = repo.add_event(session, actor=principal.name, kind=body.kind, account=body.account,
                       gpus=body.gpus, gpu_type=body.gpu_type, detail=body.detail)
    return EventOut(**repo.event_dict(e, body.account))


def _decide(event_id: int, session: SessionDep, admin: AdminToken, approve: bool) -> EventOut:
    e = repo.decide_event(session, actor=admin.name, event_id=event_id, approve=approve)
    return EventOut(**repo.event_dict(e, session.get_one(Account, e.account_id).name))


EventId = Annotated[int, Path(ge=1, le=2**31 - 1)]


@router.post("/quota-events/{event_id}/approve", response_model=EventOut)
def approve(event_id: EventId, session: SessionDep, admin: AdminToken) -> EventOut:
    return _decide(event_id, session, admin, True)


@router.post("/quota-events/{event_id}/reject", response_model=EventOut)
def reject(event_id: EventId, session: SessionDep, admin: AdminToken) -> EventOut:
    return _decide(event_id, session, admin, False)
