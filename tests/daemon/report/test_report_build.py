"""The report over a hand-built ledger (SQLite and PostgreSQL): every number checked against\narithmetic done here."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine

from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.model import Report
from railgang.daemon.report.render import to_csv, to_json
from railgang.daemon.report.service import NoReportData, make_report, parse_day
from railgang.db.session import session_scope
from tests.daemon.report.ledger_builder import DAY, T0, Ledger

D3 = T0 + 3 * DAY  # 2026-11-26, the report's day
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def build(engine: Engine, teams: frozenset[str] | None = None,
          settings: ReportSettings | None = None) -> Report:
    with session_scope(engine) as s:
        return make_report(s, parse_day("2026-11-26"), settings or ReportSettings(), now=NOW,
                           teams=teams)


@pytest.fixture
def ledger(engine: Engine) -> Ledger:
    led = Ledger(engine).team("a", 8).team("b", 16).team("idle", 8)
    led.rate("h100", "reserved", 2.0).rate("h100", "spot", 0.5)
    # team a: 3 earlier days of 8 GPU x 4 h = 32 GPU-h, then 8 GPUs all day = 192 GPU-h (6x)
    for d in range(3):
        led.job(f"a{d}", "a", gpus=8, submit=T0 + d * DAY,
                segments=[(T0 + d * DAY, T0 + d * DAY + 4 * 3600, 8, "n01")])
    led.job("a-big", "a", gpus=8, submit=D3 - 7200, fractions=(0.8, 0.5),
            segments=[(D3, D3 + DAY, 8, "n01")], priority_class=1)
    # team b: preempted (gap), then resized (at once, other size), on spot capacity
    led.job("b1", "b", gpus=8, submit=D3, capacity="spot", priority_class=3, segments=[
        (D3, D3 + 3600, 8, "n02"), (D3 + 7200, D3 + 10800, 8, "n02"),
        (D3 + 10800, D3 + 14400, 4, "n02")])
    return led


def test_teams_costs_and_quota(ledger: Ledger, engine: Engine) -> None:
    rep = build(engine)
    a, b, idle = rep.teams
    assert (a.team, b.team, idle.team) == ("a", "b", "idle")
    assert a.allocated_gpu_h == 192 and a.quota_gpu_h == 8 * 24 and a.quota_use_pct == 100
    assert a.compute_gpu_h == pytest.approx(153.6) and a.productive_gpu_h == 96
    assert a.showback == 384 and a.chargeback == 384
    assert b.allocated_gpu_h == 8 + 8 + 4 and b.showback == pytest.approx(20 * 0.5)
    # b holds a 16-GPU guarantee: billed 16 x 24 h at its GPU type's reserved rate
    assert b.chargeback == 16 * 24 * 2.0
    assert idle.allocated_gpu_h == 0 and idle.chargeback == 8 * 24 * 2.0
    assert rep.totals["allocated_gpu_h"] == 212


def test_cost_of_chaos_from_segment_chains(ledger: Ledger, engine: Engine) -> None:
    c = build(engine).chaos
    assert (c.preemptions, c.resizes, c.spot_interruptions) == (1, 1, 1)
    assert c.lost_gpu_h == pytest.approx(8 * 0.75) and c.lost_cost == pytest.approx(6 * 0.5)


def test_queue_per_class(ledger: Ledger, engine: Engine) -> None:
    q = {r.priority_class: r for r in build(engine).queue}
    assert q[1].started == 1 and q[1].wait_p50_s == 7200
    assert q[3].started == 1 and q[3].wait_p50_s == 0
    assert q[1].max_depth == 0  # it waited before midnight: not in this day's queue
    assert q[0].max_depth == 0 and q[0].wait_p50_s is None


def test_cancelled_before_starting_is_not_waiting(ledger: Ledger, engine: Engine) -> None:
    from sqlalchemy import update

    from railgang.db.models import Job

    ledger.job("gone", "b", gpus=2, submit=D3 - DAY, segments=[], priority_class=2)
    ledger.job("waits", "b", gpus=2, submit=D3 + 3600, segments=[], priority_class=2)
    with session_scope(engine) as s:
        s.execute(update(Job).where(Job.slurm_job_id.in_(["gone", "waits"]))
                  .values(state="PENDING"))
        s.execute(update(Job).where(Job.slurm_job_id == "gone").values(state="CANCELLED"))
    q2 = {r.priority_class: r for r in build(engine).queue}[2]
    assert q2.waiting_at_end == 1 and q2.max_depth == 1 and q2.started == 0


def test_team_surge_and_idle_reservation(ledger: Ledger, engine: Engine) -> None:
    kinds = {(a.kind, a.subject) for a in build(engine).anomalies}
    assert ("team_surge", "a") in kinds  # 192 GPU-h against a usual 32
    assert ("idle_reservation", "idle") in kinds  # 72 h of history, nothing used
    assert ("idle_reservation", "a") not in kinds


def test_team_scope_hides_other_teams(ledger: Ledger, engine: Engine) -> None:
    rep = build(engine, teams=frozenset({"b"}))
    assert [t.team for t in rep.teams] == ["b"]
    assert {j.team for j in rep.top_jobs} == {"b"}
    assert all(a.team in (None, "b") for a in rep.anomalies)
    assert rep.teams_scope == ["b"]


def test_pool_size_and_gpu_detectors_from_telemetry(ledger: Ledger, engine: Engine) -> None:
    # n01 carries team a's job all day: 11 min of zombie at 10:00 (memory held, 120 W)
    sm = [93.0] * 600 + [0.0] * 12 + [93.0] * 828
    power = [650.0] * 600 + [120.0] * 12 + [650.0] * 828
    for g in range(8):
        ledger.samples("n01", g, D3, sm, power=power)
    rep = build(engine, settings=ReportSettings(pool_gpus={"h100": 24}))
    assert rep.pools[0].gpus == 24 and rep.pools[0].capacity_source == "config"
    assert rep.pools[0].util_pct == pytest.approx(100 * 212 / (24 * 24), abs=0.01)
    [zombie] = [a for a in rep.anomalies if a.kind == "zombie"]
    assert zombie.subject == "a-big" and zombie.at == D3 + 600 * 60 and zombie.value == 11.0
    rep2 = build(engine, settings=ReportSettings(thresholds={"zombie_min_s": 900}))  # type: ignore[arg-type]
    assert [a for a in rep2.anomalies if a.kind == "zombie"] == []


def test_outputs_are_consistent(ledger: Ledger, engine: Engine) -> None:
    rep = build(engine)
    import json

    data = json.loads(to_json(rep))
    assert data["teams"][0]["team"] == "a" and data["chaos"]["preemptions"] == 1
    teams_csv = to_csv(rep, "teams").splitlines()
    assert teams_csv[0].startswith("team,department,guaranteed_gpus")
    assert len(teams_csv) == 1 + len(rep.teams)
    long = to_csv(rep, "all")
    assert "teams,0,allocated_gpu_h,192.0" in long and "chaos,0,resizes,1" in long


def test_day_without_data(engine: Engine) -> None:
    Ledger(engine).team("a", 8)
    with pytest.raises(NoReportData, match="no ledger segments or telemetry for 2026-11-26"):
        build(engine)


def test_thresholds_from_the_config_file(tmp_path: Path) -> None:
    from railgang.daemon.config import load_settings
    from railgang.errors import ConfigError

    good = tmp_path / "railgang.toml"
    good.write_text('[report]\ndir = "/srv/reports"\npool_gpus = { h100 = 512 }\n'
                    "[report.thresholds]\nzombie_min_s = 300\nstarved_sd_pct = 25\n")
    r = load_settings(good).report
    assert r.thresholds.zombie_min_s == 300 and r.thresholds.starved_sd_pct == 25
    assert r.thresholds.surge_ratio == 3.0 and r.pool_gpus == {"h100": 512}
    bad = tmp_path / "bad.toml"
    bad.write_text("[report.thresholds]\nzombie_minutes = 5\n")
    with pytest.raises(ConfigError, match=r"report\.thresholds\.zombie_minutes: unknown key"):
        load_settings(bad)
    bad.write_text("[report.thresholds]\nsurge_ratio = 0.5\n")
    with pytest.raises(ConfigError, match=r"report\.thresholds\.surge_ratio"):
        load_settings(bad)
