"""The organisation tree and its quotas; effective quota now."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from railgang.daemon.api.deps import (
    AdminToken,
    CurrentToken,
    PageDep,
    SessionDep,
    require_read,
)
from railgang.daemon.api.schemas import (
    GPU_TYPE,
    AccountCreate,
    AccountOut,
    AccountUpdate,
    EffectiveQuotaOut,
    LevelOut,
    PageOf,
    QuotaIn,
    QuotaOut,
)
from railgang.db.repositories import org

router = APIRouter(prefix="/v1/accounts", tags=["organisation and quotas"])

AccountName = Annotated[str, Path(max_length=64)]
GpuType = Annotated[str, Path(pattern=GPU_TYPE)]


def _out(session: SessionDep, name: str) -> AccountOut:
    acc = org.get_account(session, name)
    return AccountOut(**org.account_dict(acc, org.quotas_of(session, acc)))


@router.get("", response_model=PageOf[AccountOut])
def list_accounts(session: SessionDep, principal: CurrentToken, page: PageDep,
                  level: Annotated[str | None, Query(pattern="^(org|dept|team)$")] = None
                  ) -> PageOf[AccountOut]:
    """The tree, flat and sorted by name. A team-scoped token sees only its teams."""
    accounts = org.list_accounts(session,
                                 names=None if principal.is_admin else set(principal.teams))
    if level is not None:
        accounts = [a for a in accounts if a.level == level]
    chunk = accounts[page.offset:page.offset + page.limit]
    quotas = org.quotas_by_account(session, chunk)
    return PageOf[AccountOut](items=[AccountOut(**org.account_dict(a, quotas[a.id]))
                                     for a in chunk],
                              total=len(accounts), limit=page.limit, offset=page.offset)


@router.post("", status_code=201, response_model=AccountOut)
def create_account(body: AccountCreate, session: SessionDep, admin: AdminToken) -> AccountOut:
    """Add an organisation, department or team (refused if it breaks the quota hierarchy)."""
    org.create_account(session, actor=admin.name, name=body.name, level=body.level,
                       parent=body.parent, guaranteed_gpus=body.guaranteed_gpus,
                       limit_gpus=body.limit_gpus)
    return _out(session, body.name)


@router.get("/{name}", response_model=AccountOut)
def get_account(name: AccountName, session: SessionDep, principal: CurrentToken) -> AccountOut:
    require_read(principal, name)
    return _out(session, name)


@router.patch("/{name}", response_model=AccountOut)
def update_account(name: AccountName, body: AccountUpdate, session: SessionDep,
                   admin: AdminToken) -> AccountOut:
    """Change guarantee, burst limit (``null`` removes it) or parent; all or nothing."""
    given = body.model_fields_set
    kwargs: dict[str, object] = {}
    if "limit_gpus" in given:
        kwargs["limit_gpus"] = body.limit_gpus
    if "parent" in given:
        kwargs["parent"] = body.parent
    org.update_account(session, actor=admin.name, name=name,
                       guaranteed_gpus=body.guaranteed_gpus, **kwargs)  # type: ignore[arg-type]
    return _out(session, name)


@router.delete("/{name}", status_code=204)
def delete_account(name: AccountName, session: SessionDep, admin: AdminToken) -> Response:
    org.delete_account(session, actor=admin.name, name=name)
    return Response(status_code=204)


@router.put("/{name}/quotas/{gpu_type}", response_model=QuotaOut)
def set_quota(name: AccountName, gpu_type: GpuType, body: QuotaIn, session: SessionDep,
              admin: AdminToken) -> QuotaOut:
    """Guarantee and burst limit for one GPU type or pool; ``*`` is the all-types quota."""
    org.set_quota(session, actor=admin.name, account=name, gpu_type=gpu_type,
                  guaranteed_gpus=body.guaranteed_gpus, limit_gpus=body.limit_gpus)
    return QuotaOut(gpu_type=gpu_type, guaranteed_gpus=body.guaranteed_gpus,
                    limit_gpus=body.limit_gpus)


@router.delete("/{name}/quotas/{gpu_type}", status_code=204)
def delete_quota(name: AccountName, gpu_type: GpuType, session: SessionDep,
                 admin: AdminToken) -> Response:
    org.delete_quota(session, actor=admin.name, account=name, gpu_type=gpu_type)
    return Response(status_code=204)


@router.get("/{name}/effective-quota", response_model=EffectiveQuotaOut)
def effective_quota(name: AccountName, session: SessionDep, principal: CurrentToken,
                    gpu_type: Annotated[str, Query(pattern=GPU_TYPE)] = "*"
                    ) -> EffectiveQuotaOut:
    """``Q_eff = min(Q_team, Q_dept − Σ other teams' allocation)`` (and so on up the tree), with
    the allocation taken from the ledger's open segments."""
    require_read(principal, name)
    eq = org.effective(session, name, gpu_type)
    return EffectiveQuotaOut(team=eq.team, gpu_type=eq.gpu_type, allocated=eq.allocated,
                             q_eff=eq.q_eff, binding=eq.binding,
                             levels=[LevelOut(account=lv.account, level=lv.level, cap=lv.cap,
                                              others_allocated=lv.others_allocated,
                                              headroom=lv.headroom) for lv in eq.levels])
