"""Usage, chargeback and utilisation against numbers computed by hand from the sacct capture.

The capture (tests/daemon/ledger/data, real Slurm 22.05), times relative to T = 1796057735:
job 1 team-b  8 GPUs [0,2)                                  ->  16 GPU-s
job 2 team-a 32 GPUs [0,2), shrunk to 16 [2,4), to 8 [4,12) ->  64 + 32 + 64 = 160
job 3 team-a  2 GPUs [0,3), labels experiment=llm-7b        ->   6
job 4 team-b  8 GPUs [0,6), requeued, 8 GPUs [9,15)         ->  48 + 48 = 96
job 5 team-a 16 GPUs [12, running)                          ->  16 per second up to `until`
"""

from __future__ import annotations

import csv
import io

import pytest
from sqlalchemy import update

from railgang.db.models import Job, UsageRecord
from railgang.db.session import session_scope
from tests.daemon.api.conftest import Api
from tests.daemon.api.seed import seed_ledger

T = 1796057735
RATE = 2.5  # per GPU-hour, gpu/reserved


def _iso(epoch: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _q(since: int, until: int, extra: str = "") -> str:
    return f"since={_iso(since)}&until={_iso(until)}{extra}"


@pytest.fixture
def priced(api: Api) -> Api:
    seed_ledger(api.engine)
    res = api.client.put("/v1/rates/gpu/reserved", headers=api.admin,
                         json={"per_gpu_hour": RATE})
    assert res.status_code == 200
    return api


def test_chargeback_by_team_matches_hand_computation(priced: Api) -> None:
    res = priced.client.get(f"/v1/chargeback?{_q(T, T + 22, '&group_by=team')}",
                            headers=priced.admin).json()
    rows = {r["team"]: r for r in res["items"]}
    assert rows["team-a"]["gpu_seconds"] == 160 + 6 + 16 * 10
    assert rows["team-b"]["gpu_seconds"] == 16 + 96
    assert rows["team-a"]["cost"] == pytest.approx(326 / 3600 * RATE, abs=1e-6)
    assert rows["team-b"]["cost"] == pytest.approx(112 / 3600 * RATE, abs=1e-6)
    assert rows["team-a"]["unpriced_gpu_seconds"] == 0
    assert rows["team-a"]["gpu_hours"] == pytest.approx(326 / 3600, abs=1e-6)


def test_window_clips_segments(priced: Api) -> None:
    # [T+3, T+10): job 2 16 GPUs x1 + 8 GPUs x6; job 4 8 GPUs x3 (first run) + 8 GPUs x1
    # (second run from T+9); job 1 and job 3 ended by T+3; job 5 starts at T+12
    res = priced.client.get(f"/v1/usage?{_q(T + 3, T + 10, '&group_by=team,job')}",
                            headers=priced.admin).json()
    got = {(r["team"], r["job"]): r["gpu_seconds"] for r in res["items"]}
    assert got == {("team-a", "2"): 16 + 48, ("team-b", "4"): 24 + 8}


def test_grouping_by_label_department_user_and_tier(priced: Api) -> None:
    q = _q(T, T + 22)
    lab = priced.client.get(f"/v1/chargeback?{q}&group_by=label&label=experiment",
                            headers=priced.admin).json()["items"]
    assert lab == [pytest.approx({"label": "llm-7b", "gpu_seconds": 6, "gpu_hours": 6 / 3600,
                                  "compute_gpu_seconds": None, "productive_gpu_seconds": None,
                                  "cost": 6 / 3600 * RATE, "unpriced_gpu_seconds": 0}, abs=1e-5)]
    dept = priced.client.get(f"/v1/usage?{q}&group_by=department,gpu_type,capacity,user",
                             headers=priced.admin).json()["items"]
    assert dept == [{"department": "research", "gpu_type": "gpu", "capacity": "reserved",
                     "user": "root", "gpu_seconds": 438, "gpu_hours": pytest.approx(438 / 3600, abs=1e-5),
                     "compute_gpu_seconds": None, "productive_gpu_seconds": None,
                     "cost": pytest.approx(438 / 3600 * RATE, abs=1e-5), "unpriced_gpu_seconds": 0}]


def test_unpriced_usage_is_reported_not_hidden(api: Api) -> None:
    seed_ledger(api.engine)
    row = api.client.get(f"/v1/chargeback?{_q(T, T + 22, '&group_by=team')}",
                         headers=api.admin).json()["items"][1]
    assert row["team"] == "team-b" and row["cost"] == 0 and row["unpriced_gpu_seconds"] == 112


def test_utilisation_tiers_from_telemetry_fractions(priced: Api) -> None:
    with session_scope(priced.engine) as s:
        job4 = s.query(Job).filter_by(slurm_job_id="4").one().id
        s.execute(update(UsageRecord).where(UsageRecord.job_id == job4)
                  .values(compute_fraction=0.5, productive_fraction=0.25))
    rows = priced.client.get(f"/v1/utilisation?{_q(T, T + 22)}", headers=priced.admin).json()
    b = next(r for r in rows["items"] if r["team"] == "team-b")
    assert (b["gpu_seconds"], b["compute_gpu_seconds"], b["productive_gpu_seconds"]) == (
        112, 48.0, 24.0)  # job 1 has no telemetry: counted allocated only
    a = next(r for r in rows["items"] if r["team"] == "team-a")
    assert a["compute_gpu_seconds"] is None


def test_csv_has_header_and_the_same_numbers(priced: Api) -> None:
    res = priced.client.get(f"/v1/chargeback?{_q(T, T + 22, '&group_by=team&format=csv')}",
                            headers=priced.admin)
    assert res.headers["content-type"].startswith("text/csv")
    assert res.headers["x-total-count"] == "2"
    table = list(csv.DictReader(io.StringIO(res.text)))
    assert list(table[0]) == ["team", "gpu_seconds", "gpu_hours", "compute_gpu_seconds",
                              "productive_gpu_seconds", "cost", "unpriced_gpu_seconds"]
    assert [(r["team"], int(r["gpu_seconds"]), r["compute_gpu_seconds"]) for r in table] == [
        ("team-a", 326, ""), ("team-b", 112, "")]
    assert float(table[1]["cost"]) == pytest.approx(112 / 3600 * RATE, abs=1e-6)


def test_pagination_is_bounded(priced: Api) -> None:
    q = _q(T, T + 22, "&group_by=job")
    page = priced.client.get(f"/v1/usage?{q}&limit=2&offset=1", headers=priced.admin).json()
    assert (page["total"], page["limit"], page["offset"]) == (5, 2, 1)
    assert [r["job"] for r in page["items"]] == ["2", "3"]
    res = priced.client.get(f"/v1/usage?{q}&limit=51", headers=priced.admin)
    assert res.status_code == 422 and res.json()["error"]["fields"] == {"limit": "at most 50"}


@pytest.mark.parametrize(("query", "field"), [
    ("group_by=colour", "group_by"),
    ("group_by=label", "group_by"),
    (f"since={_iso(T + 5)}&until={_iso(T)}", "since"),
    ("since=yesterday", "since"),
    ("format=xml", "format"),
], ids=["unknown-dimension", "label-without-key", "reversed-window", "bad-date", "bad-format"])
def test_bad_usage_queries_name_the_field(api: Api, query: str, field: str) -> None:
    res = api.client.get(f"/v1/usage?{query}", headers=api.admin)
    assert res.status_code == 422 and field in res.json()["error"]["fields"]
