"""Ledger and explanation rows for the API tests, from the sacct capture of the real cluster."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine

from railgang.daemon.ledger.sacct import Segment, parse_sacct
from railgang.db.repositories import explanations, ledger
from railgang.db.session import session_scope

DATA = Path(__file__).parents[1] / "ledger" / "data"
# the capture's clock: job 5 was still running when sacct was read
T_CAPTURE = 1796057757


def sacct_segments() -> list[Segment]:
    return parse_sacct((DATA / "sacct_22.05_window.json").read_text())


def seed_ledger(engine: Engine, segments: list[Segment] | None = None) -> None:
    with session_scope(engine) as s:
        ledger.upsert_segments(s, segments if segments is not None else sacct_segments(),
                               capacity_of=lambda g: "reserved")


def seed_explanations(engine: Engine) -> None:
    at = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    rows = [explanations.ExplanationRow("101", "waiting", "team-a", 1, 16, reason="quota",
                                        detail="team-a at its limit", position=1, queue_length=2,
                                        data=json.dumps({"blockers": ["research"]})),
            explanations.ExplanationRow("102", "running", "team-b", 3, 8, nodes="n[01-02]")]
    with session_scope(engine) as s:
        explanations.upsert(s, rows, cycle_id=1, at=at)
