"""The report counts the whole fleet (issue 23): pools sized from every node the ledger knows
(node_states, else telemetry of idle GPUs too), the headline numbers equal to an independent
computation straight from the ledger's rows, and the drill-downs (users, failed jobs, down and
drained nodes, wait by team, trend, ranges, anomalies by cost)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from railgang.daemon.report.config import ReportSettings
from railgang.daemon.report.model import Report
from railgang.daemon.report.render import to_html
from railgang.daemon.report.service import make_report, parse_day, parse_range
from railgang.db.session import session_scope
from railgang.errors import InputError
from tests.daemon.report.ledger_builder import DAY, T0, Ledger

D3 = T0 + 3 * DAY  # 2026-11-26
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def build(engine: Engine, day: str = "2026-11-26", last: str | None = None) -> Report:
    window = parse_day(day) if last is None else parse_range(day, last)
    with session_scope(engine) as s:
        return make_report(s, window, ReportSettings(), now=NOW)


@pytest.fixture
def fleet(engine: Engine) -> Ledger:
    """4 nodes of 8 H100s; only n01 runs anything; n04 is drained from 06:00 to 12:00."""
    led = Ledger(engine).team("a", 8).team("b", 40).rate("h100", "reserved", 2.0)
    for n in ("n01", "n02", "n03", "n04"):
        led.node(n, T0)
    led.node("n04", D3 + 6 * 3600, "drain", reason="bad ib port").node("n04", D3 + 12 * 3600)
    led.job("a1", "a", gpus=8, submit=D3 - 3600, segments=[(D3, D3 + 12 * 3600, 8, "n01")])
    led.job("b1", "b", gpus=4, submit=D3 + 3600,
            segments=[(D3 + 7200, D3 + 4 * 3600, 4, "n01")])
    led.state("b1", "FAILED", D3 + 4 * 3600)
    return led


def test_pool_is_the_whole_inventory(fleet: Ledger, engine: Engine) -> None:
    rep = build(engine)
    [pool] = rep.pools
    assert (pool.gpus, pool.nodes, pool.capacity_source) == (32, 4, "inventory")
    # 8 x 12 + 4 x 2 = 104 GPU-h of 32 x 24 = 768 (the busy node alone would say 54 %)
    assert rep.totals["allocated_pct"] == pytest.approx(100 * 104 / 768, abs=0.01)
    assert pool.util_pct == pytest.approx(100 * 104 / 768, abs=0.01)


def test_pool_from_telemetry_counts_idle_gpus(engine: Engine) -> None:
    led = Ledger(engine).team("a", 8)
    led.job("a1", "a", gpus=8, submit=D3, segments=[(D3, D3 + 6 * 3600, 8, "n01")])
    for n in ("n01", "n02"):
        for g in range(8):
            led.samples(n, g, D3, [50.0] * 10)
    [pool] = build(engine).pools
    assert (pool.gpus, pool.nodes, pool.capacity_source) == (16, 2, "telemetry")
    assert pool.util_pct == pytest.approx(100 * 48 / (16 * 24), abs=0.01)


def test_drilldowns(fleet: Ledger, engine: Engine) -> None:
    rep = build(engine)
    [down] = rep.nodes_down
    assert (down.node, down.state, down.reason, down.lost_gpu_h) == ("n04", "drain",
                                                                      "bad ib port", 48)
    [ended] = rep.ended
    assert (ended.job, ended.state, ended.gpu_h) == ("b1", "FAILED", 8)
    users = {(u.user, u.team): u.allocated_gpu_h for u in rep.users}
    assert users == {("a-u", "a"): 96, ("b-u", "b"): 8}
    waits = {w.team: w for w in rep.team_waits}
    assert waits["a"].wait_p50_s == 3600 and waits["b"].wait_p50_s == 3600
    assert rep.team_totals["allocated_gpu_h"] == 104 and rep.team_totals["guaranteed_gpus"] == 48
    assert rep.currency == "USD"
    # 48 guaranteed GPUs on a 32-GPU fleet: said at the top
    assert any("guarantees exceed the fleet" in n for n in rep.notes)
    assert rep.trend is not None and rep.trend.days[-1] == "2026-11-26"
    assert rep.trend.fleet_gpu_h[-1] == 104 and rep.trend.fleet_pct[-1] == pytest.approx(
        100 * 104 / 768, abs=0.01)


def test_a_range_of_days(fleet: Ledger, engine: Engine) -> None:
    rep = build(engine, "2026-11-25", "2026-11-27")
    assert rep.date == "2026-11-25..2026-11-27" and rep.until - rep.since == 3 * DAY
    assert rep.totals["capacity_gpu_h"] == 32 * 72 and rep.totals["allocated_gpu_h"] == 104
    # the trend is read per day, not spread over the range
    assert rep.trend is not None and rep.trend.days[-3:] == ["2026-11-25", "2026-11-26",
                                                             "2026-11-27"]
    assert rep.trend.fleet_gpu_h[-3:] == [0, 104, 0] and rep.trend.teams["a"][-2] == 96
    with pytest.raises(InputError, match="--to 2026-11-24 is before --from 2026-11-25"):
        parse_range("2026-11-25", "2026-11-24")
    with pytest.raises(InputError, match="more than 92"):
        parse_range("2026-01-01", "2026-12-31")


def test_anomalies_ranked_by_cost_with_units(engine: Engine) -> None:
    led = Ledger(engine).team("a", 8).team("idle", 8).rate("h100", "reserved", 2.0)
    for d in range(3):
        led.job(f"a{d}", "a", gpus=8, submit=T0 + d * DAY,
                segments=[(T0 + d * DAY, T0 + d * DAY + 4 * 3600, 8, "n01")])
    led.job("big", "a", gpus=8, submit=D3, segments=[(D3, D3 + DAY, 8, "n01")])
    rep = build(engine)
    kinds = [(a.kind, a.cost) for a in rep.anomalies]
    # idle: 8 GPUs x 24 h x 2.0 unused = 384; a's surge: its showback 192 GPU-h x 2.0 = 384
    assert kinds[:2] in ([("idle_reservation", 384.0), ("team_surge", 384.0)],
                         [("team_surge", 384.0), ("idle_reservation", 384.0)])
    costs = [a.cost for a in rep.anomalies if a.cost is not None]
    assert costs == sorted(costs, reverse=True)
    assert all(a.unit for a in rep.anomalies)
    # read in Chromium: a group of one finding read 'from 03:19 to 03:19'; its time shows once
    html = to_html(rep)
    assert "<th>first found (UTC)</th><th>last found (UTC)</th>" in html
    row = next(r for r in re.findall(r"<tr>(.*?)</tr>", html, re.S) if ">idle reservation<" in r)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert cells[3] == "1" and cells[4] and cells[5] == "", cells


def _independent(url: str, since: int, until: int) -> dict[str, object]:
    """The headline numbers from the ledger's tables by plain SQL and Python, not the
    report's code: GPU-seconds of each segment clipped to the window, the fleet from the last
    node_states row of each node."""
    import sqlite3

    con = sqlite3.connect(url.removeprefix("sqlite:///"))
    team_s: dict[str, float] = {}
    cost = 0.0
    rates = dict(((t, c), r) for t, c, r in con.execute(
        "SELECT gpu_type, capacity, per_gpu_hour FROM rates"))
    for team, gpus, start, end, gtype, cap in con.execute(
            "SELECT account, gpus, start_epoch, end_epoch, gpu_type, capacity "
            "FROM usage_records WHERE start_epoch < ? AND (end_epoch IS NULL OR end_epoch > ?)",
            (until, since)):
        held = gpus * (min(end if end is not None else until, until) - max(start, since))
        team_s[team] = team_s.get(team, 0.0) + held
        cost += held / 3600 * rates.get((gtype, cap), 0.0)
    fleet = con.execute(
        "SELECT SUM(gpus) FROM node_states s WHERE at_epoch = (SELECT MAX(at_epoch) FROM "
        "node_states t WHERE t.node = s.node AND t.at_epoch < ?)", (until,)).fetchone()[0]
    con.close()
    alloc = sum(team_s.values())
    return {"fleet_gpus": fleet, "team_gpu_h": {k: v / 3600 for k, v in team_s.items()},
            "allocated_gpu_h": alloc / 3600,
            "allocated_pct": 100 * alloc / (fleet * (until - since)), "showback": cost}


@pytest.mark.parametrize("day", ["2026-11-24", "2026-11-26", "2026-11-28"])
def test_headline_numbers_equal_the_ledger(sim_week, day: str) -> None:  # type: ignore[no-untyped-def]
    from railgang.db.session import make_engine

    window = parse_day(day)
    eng = make_engine(sim_week.url)
    try:
        with session_scope(eng) as s:
            rep = make_report(s, window, ReportSettings(), now=NOW)
    finally:
        eng.dispose()
    want = _independent(sim_week.url, window.since, window.until)
    assert sum(p.gpus for p in rep.pools) == want["fleet_gpus"] == 32
    assert rep.totals["allocated_gpu_h"] == pytest.approx(want["allocated_gpu_h"], abs=0.01)
    assert rep.totals["allocated_pct"] == pytest.approx(want["allocated_pct"], abs=0.01)
    assert rep.totals["showback"] == pytest.approx(want["showback"], abs=0.05)
    team_h = want["team_gpu_h"]
    assert isinstance(team_h, dict)
    assert {t.team: t.allocated_gpu_h for t in rep.teams if t.allocated_gpu_h} == pytest.approx(
        {k: v for k, v in team_h.items() if v}, abs=0.01)
    assert rep.team_totals["allocated_gpu_h"] == pytest.approx(want["allocated_gpu_h"], abs=0.01)


def test_axes_start_at_zero_and_empty_charts_say_so(fleet: Ledger, engine: Engine,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """No -0.04..0.04 axis for an empty chart; power from 0 W."""
    from railgang.daemon.report import charts

    figs: list[object] = []
    monkeypatch.setattr(charts, "_uri", lambda fig: figs.append(fig) or "data:,")
    rep = build(engine)
    charts.all_charts(rep)
    for fig in figs:
        for ax in fig.axes:  # type: ignore[attr-defined]
            bars = ax.get_title().startswith(("GPU-hours per team", "% of each pool"))
            value_axis_from = ax.get_xlim()[0] if bars else ax.get_ylim()[0]
            assert value_axis_from == 0, ax.get_title()
    empty = Report(rep.date, rep.since, rep.until, rep.generated_at, None, rep.totals, [], [],
                   [], [], rep.chaos, [], {"t": [], "util_pct": [], "power_w": [],
                                           "alloc_pct": []})
    figs.clear()
    charts.all_charts(empty)
    for fig in figs:
        [ax] = fig.axes  # type: ignore[attr-defined]
        assert ax.get_ylim() == (0, 1) and ax.texts, ax.get_title()


def test_the_header_says_when_it_was_generated_in_words_a_reader_scans(fleet: Ledger, engine: Engine) -> None:
    """Read in Chromium: 'generated 2026-12-04T03:19:41+00:00.Whole fleet.' (an ISO stamp, and no
    space before the scope)."""
    html = to_html(build(engine))
    assert "generated 2026-12-01 00:00 UTC. Whole fleet." in " ".join(html.split())
