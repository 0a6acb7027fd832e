"""The quota tree over the API: hierarchy refusals name every failing field and write nothing
(not even the audit entry); effective quota from the ledger's open segments."""

from __future__ import annotations

from typing import Any

import pytest

from railgang.daemon.ledger.sacct import Segment
from tests.daemon.api.conftest import Api
from tests.daemon.api.seed import seed_ledger


def _snapshot(api: Api) -> tuple[Any, int]:
    accounts = api.client.get("/v1/accounts?limit=50", headers=api.admin).json()
    audit_total = api.client.get("/v1/audit", headers=api.admin).json()["total"]
    return accounts, audit_total


REFUSALS = [
    # (method, path, body, failing fields)
    ("PATCH", "/v1/accounts/team-a", {"guaranteed_gpus": 65},
     {"team-a.guaranteed_gpus", "research.guaranteed_gpus"}),
    ("PATCH", "/v1/accounts/team-b", {"guaranteed_gpus": 40},
     {"research.guaranteed_gpus"}),
    ("POST", "/v1/accounts", {"name": "team-d", "level": "team", "parent": "research",
                              "guaranteed_gpus": 17}, {"research.guaranteed_gpus"}),
    ("PATCH", "/v1/accounts/team-a", {"limit_gpus": 97}, {"team-a.limit_gpus"}),
    ("PATCH", "/v1/accounts/team-a", {"limit_gpus": 8}, {"team-a.guaranteed_gpus"}),
    ("PATCH", "/v1/accounts/research", {"guaranteed_gpus": 40},
     {"research.guaranteed_gpus"}),
    ("PATCH", "/v1/accounts/ml", {"guaranteed_gpus": 50},
     {"ml.guaranteed_gpus", "research.guaranteed_gpus"}),
    ("PATCH", "/v1/accounts/team-c", {"parent": "research"}, {"research.guaranteed_gpus"}),
]


@pytest.mark.parametrize(("method", "path", "body", "fields"), REFUSALS,
                         ids=["team-over-dept", "sum-over-dept", "new-team-over-sum",
                              "limit-over-dept-limit", "guarantee-over-own-limit",
                              "dept-under-its-teams", "org-under-its-depts", "move-over-sum"])
def test_hierarchy_breaks_are_refused_atomically(api: Api, method: str, path: str,
                                                 body: dict[str, Any], fields: set[str]) -> None:
    before = _snapshot(api)
    res = api.client.request(method, path, json=body, headers=api.admin)
    assert res.status_code == 422, res.text
    err = res.json()["error"]
    assert err["code"] == "validation_failed" and "nothing was written" in err["message"]
    assert set(err["fields"]) == fields
    assert _snapshot(api) == before


def test_per_gpu_type_quota_checked_against_parent_type_quota(api: Api) -> None:
    h = api.admin
    assert api.client.put("/v1/accounts/research/quotas/h200", headers=h,
                          json={"guaranteed_gpus": 24, "limit_gpus": 32}).status_code == 200
    assert api.client.put("/v1/accounts/team-a/quotas/h200", headers=h,
                          json={"guaranteed_gpus": 16}).status_code == 200
    before = _snapshot(api)
    res = api.client.put("/v1/accounts/team-b/quotas/h200", headers=h,
                         json={"guaranteed_gpus": 9})
    assert res.status_code == 422
    assert set(res.json()["error"]["fields"]) == {"quotas[h200].research.guaranteed_gpus"}
    assert _snapshot(api) == before
    acc = api.client.get("/v1/accounts/team-a", headers=h).json()
    assert acc["quotas"] == [{"gpu_type": "h200", "guaranteed_gpus": 16, "limit_gpus": None}]


def test_accepted_change_is_audited_with_before_and_after(api: Api) -> None:
    res = api.client.patch("/v1/accounts/team-b", headers=api.admin,
                           json={"guaranteed_gpus": 20, "limit_gpus": 30})
    assert res.status_code == 200 and res.json()["limit_gpus"] == 30
    entry = api.client.get("/v1/audit?limit=1", headers=api.admin).json()["items"][0]
    assert entry["actor"] == "root" and entry["action"] == "account.update"
    assert entry["before"]["guaranteed_gpus"] == 16 and entry["after"]["guaranteed_gpus"] == 20
    # limit_gpus: null removes the burst limit; a field not given is left alone
    res = api.client.patch("/v1/accounts/team-b", headers=api.admin, json={"limit_gpus": None})
    assert res.json()["limit_gpus"] is None and res.json()["guaranteed_gpus"] == 20


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "t", "level": "team"}, "parent"),
    ({"name": "t", "level": "team", "parent": "ml"}, "parent"),
    ({"name": "t", "level": "org", "parent": "ml"}, "parent"),
    ({"name": "t", "level": "team", "parent": "nope"}, "parent"),
    ({"name": "team-a", "level": "team", "parent": "research"}, "name"),
    ({"name": "bad name", "level": "team", "parent": "research"}, "name"),
    ({"name": "t", "level": "team", "parent": "research", "guaranteed_gpus": -1},
     "guaranteed_gpus"),
    ({"name": "t", "level": "squad", "parent": "research"}, "level"),
], ids=["team-without-parent", "team-under-org", "org-with-parent", "unknown-parent",
        "duplicate", "bad-name", "negative", "unknown-level"])
def test_invalid_accounts_name_the_field(api: Api, body: dict[str, Any], field: str) -> None:
    res = api.client.post("/v1/accounts", headers=api.admin, json=body)
    assert res.status_code in (409, 422), res.text
    assert field in res.json()["error"]["fields"]


def test_delete_refuses_an_account_with_children(api: Api) -> None:
    res = api.client.delete("/v1/accounts/research", headers=api.admin)
    assert res.status_code == 409 and "name" in res.json()["error"]["fields"]
    assert api.client.delete("/v1/accounts/team-c", headers=api.admin).status_code == 204
    assert api.client.get("/v1/accounts/team-c", headers=api.admin).status_code == 404


def _running(job: str, account: str, gpus: int, gpu_type: str = "gpu") -> Segment:
    return Segment("c", job, account, "u", "gpu", "RUNNING", "n01", gpus, gpu_type, 1000, None)


def test_effective_quota_from_open_segments(api: Api) -> None:
    # research: guaranteed 64, limit 96 -> cap 96; team-a limit 48; team-b 16 guaranteed
    seed_ledger(api.engine, [_running("1", "team-b", 40), _running("2", "team-a", 8),
                             _running("3", "team-c", 30),
                             Segment("c", "4", "team-b", "u", "gpu", "COMPLETED", "n02", 64,
                                     "gpu", 10, 20)])
    eq = api.client.get("/v1/accounts/team-a/effective-quota", headers=api.team_a).json()
    assert eq["allocated"] == 8
    levels = {lv["account"]: lv for lv in eq["levels"]}
    assert levels["research"]["others_allocated"] == 40  # team-b's open 40, not the closed 64
    assert levels["ml"]["others_allocated"] == 70  # team-b 40 + team-c 30
    # min(48, 96 - 40, 128 - 70) = min(48, 56, 58)
    assert (eq["q_eff"], eq["binding"]) == (48, "team-a")
    api.client.patch("/v1/accounts/research", headers=api.admin, json={"limit_gpus": 80})
    eq = api.client.get("/v1/accounts/team-a/effective-quota", headers=api.team_a).json()
    assert (eq["q_eff"], eq["binding"]) == (40, "research")  # min(48, 80 - 40, 58)
    res = api.client.get("/v1/accounts/research/effective-quota", headers=api.admin)
    assert res.status_code == 422
