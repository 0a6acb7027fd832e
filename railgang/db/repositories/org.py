"""The account tree and its quotas: create, change and delete with the hierarchy checked before
the caller commits, every change written to the audit log, and the inputs of ``Q_eff``.

A refused change raises ``ValidationFailed`` naming every failing field; the caller's
transaction is rolled back, so nothing is partly written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from railgang.db.models import Account, UsageRecord
from railgang.db.org import AccountQuota
from railgang.db.repositories import audit
from railgang.errors import ConflictError, NotFoundError, ValidationFailed
from railgang.org.hierarchy import (
    ANY_GPU,
    EffectiveQuota,
    QuotaNode,
    check_hierarchy,
    effective_quota,
)

PARENT_LEVEL = {"org": None, "dept": "org", "team": "dept"}
_UNSET: Any = object()


def account_dict(a: Account, quotas: list[AccountQuota] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": a.name, "level": a.level,
                           "parent": a.parent.name if a.parent is not None else None,
                           "guaranteed_gpus": a.guaranteed_gpus, "limit_gpus": a.limit_gpus}
    if quotas is not None:
        out["quotas"] = [{"gpu_type": q.gpu_type, "guaranteed_gpus": q.guaranteed_gpus,
                          "limit_gpus": q.limit_gpus} for q in quotas]
    return out


def list_accounts(s: Session, *, names: set[str] | None = None) -> list[Account]:
    q = select(Account).options(selectinload(Account.parent)).order_by(Account.name)
    if names is not None:
        q = q.where(Account.name.in_(sorted(names)))
    return list(s.scalars(q))


def get_account(s: Session, name: str) -> Account:
    acc = s.scalars(select(Account).where(Account.name == name)).one_or_none()
    if acc is None:
        raise NotFoundError(f"no account {name!r}", fields={"name": "unknown account"})
    return acc


def quotas_of(s: Session, account: Account) -> list[AccountQuota]:
    return list(s.scalars(select(AccountQuota).where(AccountQuota.account_id == account.id)
                          .order_by(AccountQuota.gpu_type)))


def quotas_by_account(s: Session, accounts: list[Account]) -> dict[int, list[AccountQuota]]:
    """The per-type quotas of many accounts in one query."""
    out: dict[int, list[AccountQuota]] = {a.id: [] for a in accounts}
    if accounts:
        for q in s.scalars(select(AccountQuota).where(AccountQuota.account_id.in_(list(out)))
                           .order_by(AccountQuota.gpu_type)):
            out[q.account_id].append(q)
    return out


def _check_parent(s: Session, level: str, parent: str | None) -> Account | None:
    if level not in PARENT_LEVEL:
        raise ValidationFailed("unknown level", fields={"level": "must be org, dept or team"})
    want = PARENT_LEVEL[level]
    if want is None:
        if parent is not None:
            raise ValidationFailed("an organisation has no parent",
                                   fields={"parent": "must be empty for level org"})
        return None
    if parent is None:
        raise ValidationFailed(f"a {level} needs a parent",
                               fields={"parent": f"name the {want} this {level} belongs to"})
    acc = s.scalars(select(Account).where(Account.name == parent)).one_or_none()
    if acc is None:
        raise ValidationFailed("unknown parent", fields={"parent": f"no account {parent!r}"})
    if acc.level != want:
        raise ValidationFailed("wrong parent level",
                               fields={"parent": f"{parent!r} is a {acc.level}; a {level}'s "
                                                 f"parent must be a {want}"})
    return acc


def quota_nodes(s: Session, gpu_type: str = ANY_GPU) -> dict[str, QuotaNode]:
    """Each account's quota for ``gpu_type``: its row for that type, else its overall quota."""
    s.flush()
    accounts = list(s.scalars(select(Account)))
    by_id = {a.id: a for a in accounts}
    typed: dict[int, AccountQuota] = {}
    if gpu_type != ANY_GPU:
        typed = {q.account_id: q for q in s.scalars(
            select(AccountQuota).where(AccountQuota.gpu_type == gpu_type))}
    nodes: dict[str, QuotaNode] = {}
    for a in accounts:
        parent = by_id[a.parent_id].name if a.parent_id in by_id else None
        q = typed.get(a.id)
        g, lim = (q.guaranteed_gpus, q.limit_gpus) if q else (a.guaranteed_gpus, a.limit_gpus)
        nodes[a.name] = QuotaNode(a.name, a.level, parent, g, lim,
                                  own=gpu_type == ANY_GPU or q is not None)
    return nodes


def validate(s: Session) -> None:
    """Raise ``ValidationFailed`` with every failing field of the tree as it stands in ``s``."""
    failures = check_hierarchy(quota_nodes(s))
    types = s.scalars(select(AccountQuota.gpu_type).distinct()).all()
    for t in sorted(types):
        failures.update(check_hierarchy(quota_nodes(s, t), prefix=f"quotas[{t}]."))
    if failures:
        raise ValidationFailed("the change would break the quota hierarchy; nothing was written",
                               fields=failures)


def create_account(s: Session, *, actor: str, name: str, level: str, parent: str | None,
                   guaranteed_gpus: int = 0, limit_gpus: int | None = None) -> Account:
    if s.scalars(select(Account.id).where(Account.name == name)).first() is not None:
        raise ConflictError(f"account {name!r} exists", fields={"name": "already taken"})
    parent_acc = _check_parent(s, level, parent)
    acc = Account(name=name, level=level, parent=parent_acc, guaranteed_gpus=guaranteed_gpus,
                  limit_gpus=limit_gpus, created_at=datetime.now(UTC))
    s.add(acc)
    validate(s)
    audit.record(s, actor=actor, action="account.create", target=f"account:{name}",
                 before=None, after=account_dict(acc))
    return acc


def update_account(s: Session, *, actor: str, name: str, guaranteed_gpus: int | None = None,
                   limit_gpus: int | None = _UNSET, parent: str | None = _UNSET) -> Account:
    acc = get_account(s, name)
    before = account_dict(acc)
    if guaranteed_gpus is not None:
        acc.guaranteed_gpus = guaranteed_gpus
    if limit_gpus is not _UNSET:
        acc.limit_gpus = limit_gpus
    if parent is not _UNSET:
        acc.parent = _check_parent(s, acc.level, parent)
    validate(s)
    audit.record(s, actor=actor, action="account.update", target=f"account:{name}",
                 before=before, after=account_dict(acc))
    return acc


def delete_account(s: Session, *, actor: str, name: str) -> None:
    acc = get_account(s, name)
    kids = s.scalar(select(func.count()).select_from(Account).where(Account.parent_id == acc.id))
    if kids:
        raise ConflictError(f"account {name!r} has {kids} child account(s)",
                            fields={"name": "delete or move its children first"})
    before = account_dict(acc, quotas_of(s, acc))
    s.delete(acc)
    audit.record(s, actor=actor, action="account.delete", target=f"account:{name}",
                 before=before, after=None)


def set_quota(s: Session, *, actor: str, account: str, gpu_type: str, guaranteed_gpus: int,
              limit_gpus: int | None) -> AccountQuota:
    acc = get_account(s, account)
    if gpu_type == ANY_GPU:
        update_account(s, actor=actor, name=account, guaranteed_gpus=guaranteed_gpus,
                       limit_gpus=limit_gpus)
        return AccountQuota(account_id=acc.id, gpu_type=ANY_GPU, guaranteed_gpus=guaranteed_gpus,
                            limit_gpus=limit_gpus)
    row = s.scalars(select(AccountQuota).where(AccountQuota.account_id == acc.id,
                                               AccountQuota.gpu_type == gpu_type)).one_or_none()
    before = None if row is None else {"guaranteed_gpus": row.guaranteed_gpus,
                                       "limit_gpus": row.limit_gpus}
    if row is None:
        row = AccountQuota(account_id=acc.id, gpu_type=gpu_type)
        s.add(row)
    row.guaranteed_gpus, row.limit_gpus = guaranteed_gpus, limit_gpus
    validate(s)
    audit.record(s, actor=actor, action="quota.set", target=f"account:{account}:{gpu_type}",
                 before=before, after={"guaranteed_gpus": guaranteed_gpus,
                                       "limit_gpus": limit_gpus})
    return row


def delete_quota(s: Session, *, actor: str, account: str, gpu_type: str) -> None:
    acc = get_account(s, account)
    row = s.scalars(select(AccountQuota).where(AccountQuota.account_id == acc.id,
                                               AccountQuota.gpu_type == gpu_type)).one_or_none()
    if row is None:
        raise NotFoundError(f"{account!r} has no quota for {gpu_type!r}",
                            fields={"gpu_type": "no such quota"})
    before = {"guaranteed_gpus": row.guaranteed_gpus, "limit_gpus": row.limit_gpus}
    s.delete(row)
    validate(s)
    audit.record(s, actor=actor, action="quota.delete", target=f"account:{account}:{gpu_type}",
                 before=before, after=None)


def allocated_now(s: Session, gpu_type: str = ANY_GPU) -> dict[str, int]:
    """GPUs held per account in open ledger segments (the running jobs)."""
    q = (select(UsageRecord.account, func.sum(UsageRecord.gpus))
         .where(UsageRecord.end_epoch.is_(None)).group_by(UsageRecord.account))
    if gpu_type != ANY_GPU:
        q = q.where(UsageRecord.gpu_type == gpu_type)
    return {acc: int(n or 0) for acc, n in s.execute(q)}


def effective(s: Session, team: str, gpu_type: str = ANY_GPU) -> EffectiveQuota:
    acc = get_account(s, team)
    if acc.level != "team":
        raise ValidationFailed("effective quota is defined for teams",
                               fields={"name": f"{team!r} is a {acc.level}"})
    return effective_quota(quota_nodes(s, gpu_type), allocated_now(s, gpu_type), team,
                           gpu_type=gpu_type)


__all__ = ["account_dict", "allocated_now", "create_account", "delete_account", "delete_quota",
           "effective", "get_account", "list_accounts", "quota_nodes", "quotas_by_account", "quotas_of", "set_quota",
           "update_account", "validate"]
