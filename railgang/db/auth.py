"""API tokens: only a SHA-256 of the secret is stored; the secret is shown once at creation."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from railgang.db.base import Base, UTCDateTime
from railgang.db.choices import ROLES


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the secret
    prefix: Mapped[str] = mapped_column(String(12))  # first characters, to recognise a token
    role: Mapped[str] = mapped_column(String(12))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    teams: Mapped[list[ApiTokenTeam]] = relationship(cascade="all, delete-orphan",
                                                     lazy="selectin")

    __table_args__ = (
        CheckConstraint("role IN ('admin', 'team-admin', 'team-reader')", name="role"),
    )


class ApiTokenTeam(Base):
    """The teams (Slurm accounts) a team-scoped token may see."""

    __tablename__ = "api_token_teams"

    token_id: Mapped[int] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"),
                                          primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"),
                                            primary_key=True)


__all__ = ["ROLES", "ApiToken", "ApiTokenTeam"]
