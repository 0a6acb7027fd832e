"""Property-based requests from the OpenAPI schema (schemathesis, in-process ASGI, bounded
examples): no operation answers with a server error, and answers match their schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)
from sqlalchemy import Engine

from railgang.daemon.api.app import create_app
from railgang.daemon.config import load_settings
from railgang.db.repositories import tokens
from railgang.db.session import session_scope
from tests.daemon.api.conftest import build_tree
from tests.daemon.api.dbs import fresh_engine
from tests.daemon.api.seed import seed_explanations, seed_ledger

ADMIN: dict[str, str] = {}


@pytest.fixture(scope="module")
def _engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with fresh_engine("sqlite", Path(tmp_path_factory.mktemp("schemathesis"))) as eng:
        build_tree(eng)
        seed_ledger(eng)
        seed_explanations(eng)
        with session_scope(eng) as s:
            _, secret = tokens.create(s, actor="test", name="fuzz", role="admin", teams=[],
                                      expires_at=None)
        ADMIN["Authorization"] = f"Bearer {secret}"
        yield eng


@pytest.fixture(scope="module")
def api_schema(_engine: Engine) -> schemathesis.BaseSchema:
    app = create_app(load_settings(db={"url": "sqlite://"}), engine=_engine)
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def _operations() -> list[tuple[str, str]]:
    spec = create_app(load_settings(db={"url": "sqlite://"})).openapi()  # no engine needed
    return sorted((method.upper(), path) for path, item in spec["paths"].items()
                  for method in item)


def _cases() -> list[tuple[str, str, GenerationMode]]:
    """Every operation in positive mode; in negative mode those with something to get wrong
    (parameters or a body)."""
    spec = create_app(load_settings(db={"url": "sqlite://"})).openapi()
    out = [(m, p, GenerationMode.POSITIVE) for m, p in _operations()]
    out += [(m, p, GenerationMode.NEGATIVE) for m, p in _operations()
            if {"parameters", "requestBody"} & set(spec["paths"][p][m.lower()])]
    return out


# schemathesis' own pytest plugin does not run under this pytest; drive hypothesis directly.
# Negative mode sends what the schema forbids (wrong types, out-of-range numbers, missing and
# extra fields, malformed path and query values): every answer is a 4xx in the error format.
# test_hostile_requests.py adds the bodies no schema describes (huge, deep, NaN, not UTF-8).
@pytest.mark.parametrize(("method", "path", "mode"), _cases(),
                         ids=lambda v: str(v.value if isinstance(v, GenerationMode) else v))
def test_no_server_errors(api_schema: schemathesis.BaseSchema, method: str, path: str,
                          mode: GenerationMode) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=12, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case: schemathesis.Case) -> None:
        response = case.call(headers=ADMIN)
        assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
        if mode is GenerationMode.POSITIVE:
            case.validate_response(response, checks=[content_type_conformance,
                                                      response_schema_conformance])
        elif response.status_code >= 400:
            assert response.json()["error"]["message"], response.text

    run()
