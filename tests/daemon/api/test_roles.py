"""Who may see and change what: admin sees all; a team token only its teams; 401 for no,
unknown, expired or revoked tokens, 403 for a valid token out of its scope or role."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from railgang.db.auth import ApiToken
from railgang.db.session import session_scope
from tests.daemon.api.conftest import Api
from tests.daemon.api.seed import seed_explanations, seed_ledger

WIDE = "since=2026-01-01T00:00:00Z&until=2027-12-31T00:00:00Z"

# everything of team-b that team-a's tokens must neither read nor change
TEAM_B_REQUESTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/accounts/team-b", None),
    ("GET", "/v1/accounts/team-b/effective-quota", None),
    ("PATCH", "/v1/accounts/team-b", {"guaranteed_gpus": 1}),
    ("DELETE", "/v1/accounts/team-b", None),
    ("PUT", "/v1/accounts/team-b/quotas/h200", {"guaranteed_gpus": 1}),
    ("GET", "/v1/quota-events?account=team-b", None),
    ("POST", "/v1/quota-events", {"kind": "restore", "account": "team-b", "gpus": 4}),
    ("GET", "/v1/jobs?account=team-b", None),
    ("GET", "/v1/jobs/102", None),
]
ADMIN_ONLY: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/accounts", {"name": "x", "level": "team", "parent": "research"}),
    ("PATCH", "/v1/accounts/team-a", {"guaranteed_gpus": 1}),
    ("GET", "/v1/tokens", None),
    ("POST", "/v1/tokens", {"name": "t2", "role": "admin"}),
    ("DELETE", "/v1/tokens/b-reader", None),
    ("GET", "/v1/audit", None),
    ("PUT", "/v1/rates/gpu/reserved", {"per_gpu_hour": 1.0}),
    ("POST", "/v1/classes/0/grants", {"kind": "account", "subject": "team-a"}),
    ("POST", "/v1/quota-events/1/approve", None),
]


def _call(api: Api, method: str, path: str, body: dict[str, Any] | None,
          headers: dict[str, str]) -> Any:
    return api.client.request(method, path, json=body, headers=headers)


def _is_error(res: Any, status: int, code: str) -> None:
    assert res.status_code == status, res.text
    body = res.json()
    assert set(body) == {"error"} and body["error"]["code"] == code
    assert set(body["error"]) == {"code", "message", "fields"}


@pytest.mark.parametrize(("method", "path", "body"), TEAM_B_REQUESTS,
                         ids=[f"{m} {p}" for m, p, _ in TEAM_B_REQUESTS])
def test_team_a_tokens_cannot_touch_team_b(api: Api, method: str, path: str,
                                           body: dict[str, Any] | None) -> None:
    seed_explanations(api.engine)
    before = api.client.get("/v1/accounts/team-b", headers=api.admin).json()
    for who in (api.team_a, api.team_a_admin):
        _is_error(_call(api, method, path, body, who), 403, "forbidden")
    # ... and nothing changed
    assert api.client.get("/v1/accounts/team-b", headers=api.admin).json() == before
    # the admin may do it (a sanity check that the request itself is valid)
    assert _call(api, method, path, body, api.admin).status_code < 400


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ONLY,
                         ids=[f"{m} {p}" for m, p, _ in ADMIN_ONLY])
def test_admin_only_routes_refuse_team_tokens(api: Api, method: str, path: str,
                                              body: dict[str, Any] | None) -> None:
    for who in (api.team_a, api.team_a_admin, api.team_b):
        _is_error(_call(api, method, path, body, who), 403, "forbidden")


def test_team_reader_sees_only_its_team(api: Api) -> None:
    seed_ledger(api.engine)
    seed_explanations(api.engine)
    names = [a["name"] for a in api.client.get("/v1/accounts", headers=api.team_a).json()["items"]]
    assert names == ["team-a"]
    rows = api.client.get(f"/v1/usage?{WIDE}&group_by=team,job", headers=api.team_a).json()
    assert {r["team"] for r in rows["items"]} == {"team-a"}
    assert {r["job"] for r in rows["items"]} == {"2", "3", "5"}
    csv = api.client.get(f"/v1/chargeback?{WIDE}&format=csv", headers=api.team_a).text
    assert "team-b" not in csv and "team-a" in csv
    jobs = api.client.get("/v1/jobs", headers=api.team_a).json()
    assert [j["job_id"] for j in jobs["items"]] == ["101"]
    assert api.client.get("/v1/jobs/101", headers=api.team_a).json()["reason"] == "quota"
    everyone = api.client.get(f"/v1/usage?{WIDE}", headers=api.admin).json()
    assert {r["team"] for r in everyone["items"]} == {"team-a", "team-b"}


def test_team_admin_records_events_for_its_own_team_only(api: Api) -> None:
    res = api.client.post("/v1/quota-events", headers=api.team_a_admin,
                          json={"kind": "restore", "account": "team-a", "gpus": 8})
    assert res.status_code == 201 and res.json()["state"] == "proposed"
    _is_error(api.client.post("/v1/quota-events", headers=api.team_a,
                              json={"kind": "restore", "account": "team-a", "gpus": 8}),
              403, "forbidden")


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer rg_not-a-token", "Basic abc"],
                         ids=["none", "empty", "unknown", "basic"])
def test_missing_or_unknown_token_is_401(api: Api, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    res = api.client.get("/v1/accounts", headers=headers)
    _is_error(res, 401, "unauthenticated")
    assert res.headers["WWW-Authenticate"] == "Bearer"


def test_expired_token_is_refused(api: Api) -> None:
    headers = api.token("short", "team-reader", ["team-a"],
                        expires_at=datetime.now(UTC) + timedelta(hours=1))
    assert api.client.get("/v1/me", headers=headers).status_code == 200
    with session_scope(api.engine) as s:
        s.execute(update(ApiToken).where(ApiToken.name == "short")
                  .values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    _is_error(api.client.get("/v1/me", headers=headers), 401, "unauthenticated")


def test_revoked_token_is_refused_at_once(api: Api) -> None:
    assert api.client.get("/v1/me", headers=api.team_b).json()["teams"] == ["team-b"]
    res = api.client.delete("/v1/tokens/b-reader", headers=api.admin)
    assert res.status_code == 200 and res.json()["revoked"] is True
    _is_error(api.client.get("/v1/me", headers=api.team_b), 401, "unauthenticated")
    listed = {t["name"]: t for t in api.client.get("/v1/tokens", headers=api.admin).json()}
    assert listed["b-reader"]["revoked"] is True
    assert all("token" not in t and "token_hash" not in t for t in listed.values())


def test_token_secret_is_stored_hashed_and_shown_once(api: Api) -> None:
    res = api.client.post("/v1/tokens", headers=api.admin,
                          json={"name": "ci", "role": "team-reader", "teams": ["team-c"]})
    assert res.status_code == 201
    secret = res.json()["token"]
    with session_scope(api.engine) as s:
        stored = s.query(ApiToken).filter_by(name="ci").one()
        assert secret not in (stored.token_hash, stored.prefix) and len(stored.token_hash) == 64
    me = api.client.get("/v1/me", headers={"Authorization": f"Bearer {secret}"}).json()
    assert me == {"name": "ci", "role": "team-reader", "teams": ["team-c"]}


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "x1", "role": "team-reader"}, "teams"),
    ({"name": "x2", "role": "admin", "teams": ["team-a"]}, "teams"),
    ({"name": "x3", "role": "team-reader", "teams": ["research"]}, "teams"),
    ({"name": "x4", "role": "team-reader", "teams": ["nope"]}, "teams"),
    ({"name": "x5", "role": "team-reader", "teams": ["team-a"],
      "expires_at": "2020-01-01T00:00:00Z"}, "expires_at"),
], ids=["reader-without-team", "admin-with-team", "dept-scope", "unknown-team", "past-expiry"])
def test_invalid_token_requests_name_the_field(api: Api, body: dict[str, Any],
                                               field: str) -> None:
    res = api.client.post("/v1/tokens", headers=api.admin, json=body)
    _is_error(res, 422, "validation_failed")
    assert field in res.json()["error"]["fields"]
