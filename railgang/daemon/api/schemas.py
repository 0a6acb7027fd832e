"""Request and response bodies. Every input is bounded (names, counts, text), so a malformed or
huge body is refused with the one error format instead of reaching the database."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

Name = str
NAME = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="Slurm account name")
GPU_TYPE = r"^(\*|[A-Za-z0-9][A-Za-z0-9_.:-]{0,31})$"
MAX_GPUS = 10_000_000

T = TypeVar("T")


class ErrorBody(BaseModel):
    code: str
    message: str
    fields: dict[str, str] = {}


class ErrorResponse(BaseModel):
    error: ErrorBody


class PageOf(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QuotaOut(BaseModel):
    gpu_type: str
    guaranteed_gpus: int
    limit_gpus: int | None


class AccountOut(BaseModel):
    name: str
    level: str
    parent: str | None
    guaranteed_gpus: int
    limit_gpus: int | None
    quotas: list[QuotaOut] = []


class AccountCreate(Strict):
    name: str = NAME
    level: Literal["org", "dept", "team"]
    parent: str | None = Field(default=None, max_length=64)
    guaranteed_gpus: int = Field(default=0, ge=0, le=MAX_GPUS)
    limit_gpus: int | None = Field(default=None, ge=0, le=MAX_GPUS)


class AccountUpdate(Strict):
    """Only the fields given change; ``limit_gpus: null`` removes the burst limit."""

    guaranteed_gpus: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    limit_gpus: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    parent: str | None = Field(default=None, max_length=64)


class QuotaIn(Strict):
    guaranteed_gpus: int = Field(ge=0, le=MAX_GPUS)
    limit_gpus: int | None = Field(default=None, ge=0, le=MAX_GPUS)


class LevelOut(BaseModel):
    account: str
    level: str
    cap: int | None
    others_allocated: int
    headroom: int | None


class EffectiveQuotaOut(BaseModel):
    team: str
    gpu_type: str
    allocated: int
    q_eff: int | None = Field(description="GPUs the team may hold now; null = uncapped")
    binding: str | None = Field(description="the account whose level sets q_eff")
    levels: list[LevelOut]


class UsageRow(BaseModel):
    model_config = ConfigDict(extra="allow")  # the grouping columns asked for
    gpu_seconds: int
    gpu_hours: float
    compute_gpu_seconds: float | None
    productive_gpu_seconds: float | None
    cost: float
    unpriced_gpu_seconds: int


class UsageOut(PageOf[UsageRow]):
    since: datetime
    until: datetime
    group_by: list[str]


class ClassOut(BaseModel):
    id: int
    name: str
    preemptible: bool
    max_time_s: int | None
    needs_grant: bool
    description: str


class GrantIn(Strict):
    kind: Literal["account", "user", "qos"]
    subject: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


class GrantOut(BaseModel):
    id: int
    class_id: int
    kind: str
    subject: str
    granted_by: str
    created_at: datetime


class RateIn(Strict):
    per_gpu_hour: float = Field(ge=0, le=1e6)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")


class RateOut(BaseModel):
    gpu_type: str
    capacity: str
    per_gpu_hour: float
    currency: str


class EventIn(Strict):
    kind: Literal["borrow", "reclaim", "lose-proposal", "restore"]
    account: str = NAME
    gpus: int = Field(ge=0, le=MAX_GPUS)
    gpu_type: str = Field(default="*", pattern=GPU_TYPE)
    detail: str = Field(default="", max_length=512)


class EventOut(BaseModel):
    id: int
    kind: str
    state: str
    account: str
    gpu_type: str
    gpus: int
    detail: str
    created_at: datetime
    decided_at: datetime | None
    decided_by: str | None


class JobOut(BaseModel):
    job_id: str
    state: str
    account: str
    priority_class: int
    gpus: int
    reason: str | None
    detail: str
    position: int | None
    queue_length: int | None
    nodes: str
    updated_at: datetime
    data: dict[str, Any] = {}


class TokenIn(Strict):
    name: str = NAME
    role: Literal["admin", "team-admin", "team-reader"]
    teams: list[str] = Field(default=[], max_length=100)
    expires_at: AwareDatetime | None = None


class TokenOut(BaseModel):
    name: str
    role: str
    teams: list[str]
    prefix: str
    created_at: datetime
    expires_at: datetime | None
    revoked: bool


class TokenCreated(TokenOut):
    token: str = Field(description="the secret; shown only now")


class AuditOut(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    target: str
    before: Any
    after: Any


class MeOut(BaseModel):
    name: str
    role: str
    teams: list[str]


__all__ = ["GPU_TYPE", "AccountCreate", "AccountOut", "AccountUpdate", "AuditOut", "ClassOut",
           "EffectiveQuotaOut", "ErrorResponse", "EventIn", "EventOut", "GrantIn", "GrantOut",
           "JobOut", "MeOut", "PageOf", "QuotaIn", "QuotaOut", "RateIn", "RateOut", "TokenCreated",
           "TokenIn", "TokenOut", "UsageOut", "UsageRow"]
