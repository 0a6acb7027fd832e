"""An API over a fresh database (SQLite, and the real PostgreSQL where marked), with a small
org tree and tokens for an admin and for two teams."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from railgang.daemon.api.app import create_app
from railgang.daemon.config import load_settings
from railgang.db.repositories import org, tokens
from railgang.db.session import session_scope
from tests.daemon.api.dbs import fresh_engine

TREE = [  # name, level, parent, guaranteed, limit
    ("ml", "org", None, 128, None),
    ("research", "dept", "ml", 64, 96),
    ("team-a", "team", "research", 32, 48),
    ("team-b", "team", "research", 16, None),
    ("product", "dept", "ml", 32, None),
    ("team-c", "team", "product", 24, None),
]


@dataclass
class Api:
    client: TestClient
    engine: Engine
    admin: dict[str, str]
    team_a: dict[str, str]  # team-reader of team-a
    team_a_admin: dict[str, str]  # team-admin of team-a
    team_b: dict[str, str]

    def token(self, name: str, role: str, teams: list[str],
              expires_at: datetime | None = None) -> dict[str, str]:
        with session_scope(self.engine) as s:
            _, secret = tokens.create(s, actor="test", name=name, role=role, teams=teams,
                                      expires_at=expires_at)
        return {"Authorization": f"Bearer {secret}"}


def build_tree(engine: Engine) -> None:
    with session_scope(engine) as s:
        for name, level, parent, g, lim in TREE:
            org.create_account(s, actor="test", name=name, level=level, parent=parent,
                               guaranteed_gpus=g, limit_gpus=lim)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def engine(db_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Engine]:
    pg = request.getfixturevalue("postgres_url") if db_kind == "postgres" else None
    with fresh_engine(db_kind, tmp_path, pg) as eng:
        yield eng


@pytest.fixture
def api(engine: Engine) -> Iterator[Api]:
    build_tree(engine)
    settings = load_settings(db={"url": "sqlite://"}, api={"page_max": 50})
    app = create_app(settings, engine=engine)
    with TestClient(app) as client:
        a = Api(client, engine, {}, {}, {}, {})
        a.admin = a.token("root", "admin", [])
        a.team_a = a.token("a-reader", "team-reader", ["team-a"])
        a.team_a_admin = a.token("a-admin", "team-admin", ["team-a"])
        a.team_b = a.token("b-reader", "team-reader", ["team-b"])
        yield a


def soon() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=2)
