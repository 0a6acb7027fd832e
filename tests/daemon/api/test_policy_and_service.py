"""Classes and grants, rates, quota events, jobs' explain, health, metrics, docs and the one
error format for routing errors."""

from __future__ import annotations

import pytest

from railgang.daemon.api.app import create_app
from railgang.daemon.config import Settings
from railgang.db.repositories import admin
from railgang.db.session import session_scope
from railgang.errors import ConfigError
from tests.daemon.api.conftest import Api
from tests.daemon.api.seed import seed_explanations


def test_classes_are_seeded_and_grants_reach_the_lua_file(api: Api) -> None:
    classes = api.client.get("/v1/classes", headers=api.team_a).json()
    assert [(c["id"], c["name"], c["needs_grant"]) for c in classes] == [
        (0, "serving", True), (1, "production", True), (2, "interactive", True),
        (3, "batch", False)]
    assert classes[2]["max_time_s"] == 4 * 3600 and classes[0]["preemptible"] is False
    for kind, subject in (("account", "team-a"), ("user", "alice"), ("qos", "serving")):
        res = api.client.post("/v1/classes/0/grants", headers=api.admin,
                              json={"kind": kind, "subject": subject})
        assert res.status_code == 201 and res.json()["granted_by"] == "root"
    again = api.client.post("/v1/classes/0/grants", headers=api.admin,
                            json={"kind": "user", "subject": "alice"})
    assert again.status_code == 409
    refused = api.client.post("/v1/classes/3/grants", headers=api.admin,
                              json={"kind": "user", "subject": "bob"})
    assert refused.status_code == 422 and "class_id" in refused.json()["error"]["fields"]
    unknown = api.client.post("/v1/classes/1/grants", headers=api.admin,
                              json={"kind": "account", "subject": "nope"})
    assert unknown.status_code == 404
    with session_scope(api.engine) as s:
        text = admin.grants_file_text(s)
    assert text.splitlines()[1:] == ["limit 2 14400", "open 3", "0 account team-a",
                                     "0 qos serving", "0 user alice"]
    grant_id = api.client.get("/v1/classes/0/grants", headers=api.admin).json()[1]["id"]
    assert api.client.delete(f"/v1/grants/{grant_id}", headers=api.admin).status_code == 204
    assert len(api.client.get("/v1/classes/0/grants", headers=api.admin).json()) == 2


def test_rates_round_trip_and_validation(api: Api) -> None:
    h = api.admin
    assert api.client.put("/v1/rates/h200/spot", headers=h,
                          json={"per_gpu_hour": 1.25}).status_code == 200
    assert api.client.put("/v1/rates/h200/spot", headers=h,
                          json={"per_gpu_hour": 1.5, "currency": "EUR"}).status_code == 200
    assert api.client.get("/v1/rates", headers=api.team_b).json() == [
        {"gpu_type": "h200", "capacity": "spot", "per_gpu_hour": 1.5, "currency": "EUR"}]
    bad = api.client.put("/v1/rates/h200/cheap", headers=h, json={"per_gpu_hour": 1})
    assert bad.status_code == 422 and "capacity" in bad.json()["error"]["fields"]
    neg = api.client.put("/v1/rates/h200/spot", headers=h, json={"per_gpu_hour": -1})
    assert neg.status_code == 422 and "per_gpu_hour" in neg.json()["error"]["fields"]


def test_use_it_or_lose_it_proposal_is_decided_once(api: Api) -> None:
    h = api.admin
    prop = api.client.post("/v1/quota-events", headers=h, json={
        "kind": "lose-proposal", "account": "team-b", "gpus": 16,
        "detail": "under 20% for 72h"}).json()
    assert prop["state"] == "proposed"
    borrow = api.client.post("/v1/quota-events", headers=h, json={
        "kind": "borrow", "account": "team-a", "gpus": 8}).json()
    assert borrow["state"] == "recorded"
    res = api.client.post(f"/v1/quota-events/{prop['id']}/approve", headers=h).json()
    assert (res["state"], res["decided_by"]) == ("approved", "root")
    again = api.client.post(f"/v1/quota-events/{prop['id']}/reject", headers=h)
    assert again.status_code == 409
    assert api.client.post(f"/v1/quota-events/{borrow['id']}/approve",
                           headers=h).status_code == 409
    assert api.client.post("/v1/quota-events/999/approve", headers=h).status_code == 404
    listed = api.client.get("/v1/quota-events?state=approved", headers=h).json()
    assert [e["id"] for e in listed["items"]] == [prop["id"]]
    mine = api.client.get("/v1/quota-events", headers=api.team_a).json()
    assert [e["account"] for e in mine["items"]] == ["team-a"]


def test_job_explain(api: Api) -> None:
    seed_explanations(api.engine)
    job = api.client.get("/v1/jobs/101", headers=api.admin).json()
    assert (job["reason"], job["position"], job["data"]) == ("quota", 1,
                                                             {"blockers": ["research"]})
    missing = api.client.get("/v1/jobs/999", headers=api.admin)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    running = api.client.get("/v1/jobs?state=running", headers=api.admin).json()["items"]
    assert [(j["job_id"], j["nodes"]) for j in running] == [("102", "n[01-02]")]


def test_health_metrics_and_docs_need_no_token(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok", "db": "ok"}
    api.client.get("/v1/accounts", headers=api.admin)
    metrics = api.client.get("/metrics").text
    assert 'railgang_api_requests_total{method="GET",route="/v1/accounts",status="200"}' in metrics
    assert "railgang_api_request_seconds_bucket" in metrics
    schema = api.client.get("/openapi.json").json()
    assert "/v1/chargeback" in schema["paths"] and "bearerAuth" not in schema["paths"]
    assert api.client.get("/docs").status_code == 200


def test_routing_errors_use_the_one_format(api: Api) -> None:
    res = api.client.get("/v1/nothing-here", headers=api.admin)
    assert res.status_code == 404
    assert res.json() == {"error": {"code": "not_found", "fields": {},
                                    "message": "no such path: /v1/nothing-here"}}
    res = api.client.put("/healthz")
    assert res.status_code == 405 and res.json()["error"]["code"] == "method_not_allowed"
    res = api.client.post("/v1/accounts", headers=api.admin, content=b"{not json")
    assert res.status_code == 422 and res.json()["error"]["code"] == "validation_failed"
    res = api.client.post("/v1/accounts", headers=api.admin,
                          json={"name": "x", "level": "team", "parent": "research", "extra": 1})
    assert res.status_code == 422 and "extra" in res.json()["error"]["fields"]


def test_prod_refuses_the_dev_secret() -> None:
    settings = Settings(environment="prod")  # built directly: load_settings would refuse first
    with pytest.raises(ConfigError, match=r"api\.secret_key: the development default"):
        create_app(settings)
