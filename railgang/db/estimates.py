"""Scores of the start-time intervals the daemon showed, so a restarted daemon keeps its
calibration (``daemon/service/estimate_calibration.py``): one row per interval settled by the
job's start, how far outside it the start fell in log time (<= 0: inside)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from railgang.db.base import Base


class EstimateScore(Base):
    __tablename__ = "estimate_scores"

    id: Mapped[int] = mapped_column(primary_key=True)
    cluster: Mapped[str] = mapped_column(String(64))
    settled_epoch: Mapped[int] = mapped_column(BigInteger)  # when the job's start was seen
    score: Mapped[float] = mapped_column(Float)

    __table_args__ = (Index("ix_estimate_scores_cluster_id", "cluster", "id"),)


__all__ = ["EstimateScore"]
