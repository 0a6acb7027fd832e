"""Fair share with a half-life through the daemon (issue 33 item 4): the ledger's finished runs,
decayed, are the accounts' input; a team that used little lately goes first, and the simulator,
fed from its own accounting, decides alike."""

from __future__ import annotations

import math
from random import Random

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from railgang.daemon.clock import SimClock
from railgang.daemon.config import load_settings
from railgang.daemon.core import decide
from railgang.daemon.core.model.actions import Start
from railgang.daemon.core.model.fairshare import decayed_run
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies.default import Default
from railgang.daemon.service.cycle import DaemonService
from railgang.daemon.service.fairshare import finished_use, half_life, parse_half_life
from railgang.daemon.service.status import explanation, render
from railgang.daemon.sim.config import SimConfig
from railgang.daemon.sim.live import LiveSim
from railgang.daemon.sim.traces.model import TraceJob
from railgang.db.repositories.ledger import upsert_segments
from railgang.db.segments import Segment
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.service.conftest import Recording

DAY = 86400.0
NOW = 100 * DAY
# the whole cluster (64 GPUs) is busy until NOW + 60; then one 64-GPU job of each team waits:
# "heavy"'s came first (it waited longer, higher ρ), "light"'s came later
_JOBS = [TraceJob("busy", 0.0, 64, 60.0, account="other", tp=8),
         TraceJob("heavy1", 10.0, 64, 3600.0, account="heavy", tp=8),
         TraceJob("light1", 30.0, 64, 3600.0, account="light", tp=8)]


def _seg(account: str, job_id: str, gpus: int, start: float, end: float | None) -> Segment:
    return Segment("c", job_id, account, "u", "gpu", "COMPLETED" if end else "RUNNING", "n1",
                   gpus, "h100", int(start), None if end is None else int(end),
                   run_start=int(start), submit=int(start))


def _ledger(engine: Engine) -> None:
    with Session(engine) as s:
        upsert_segments(s, [
            _seg("heavy", "1", 64, NOW - 3 * DAY, NOW - 2 * DAY),  # 1,536 GPU-h two days ago
            _seg("light", "2", 8, NOW - 90 * DAY, NOW - 89 * DAY),  # past ten half-lives: not read
            _seg("light", "3", 8, NOW - DAY, None),  # still running: squeue's, not the ledger's
        ], capacity_of=lambda _: "reserved")
        s.commit()


def _started(engine: Engine, fair: bool) -> list[str]:
    sim, clock = Recording(LiveSim(fabric_from_shape(8, 8, 2), _JOBS, start=NOW)), SimClock(NOW)
    policy = Default(fair_share=fair)
    service = DaemonService(engine=engine, backend=sim, policy=policy, clock=clock, leader="t:1",
                            fair_share_half_life_s=7 * DAY if fair else None)
    for t in (NOW + 40, NOW + 70, NOW + 100):
        clock.advance_to(t)
        service.run_once()
    return [a.job_id for a in sim.accepted if isinstance(a, Start)]


def test_explain_shows_the_accounts_decayed_use(engine: Engine) -> None:
    _ledger(engine)
    _started(engine, fair=True)
    settings = load_settings(db={"url": engine.url.render_as_string(hide_password=False)})
    wait = explanation(settings, "heavy1")
    use = decayed_run(64, NOW - 3 * DAY, NOW - 2 * DAY, NOW + 100, 7 * DAY) / 3600
    assert wait["state"] == "waiting" and wait["fair_share"]["gpu_h"] == pytest.approx(use, abs=0.01)
    assert wait["fair_share"]["rank"] == int(use)
    assert f"fair share: account heavy used {use:,.0f} GPU-h lately" in render(wait)


def test_the_ledger_gives_each_account_its_decayed_use(engine: Engine) -> None:
    _ledger(engine)
    h = 7 * DAY
    with Session(engine) as s:
        use = finished_use(s, NOW, h)
    assert use["heavy"] == pytest.approx(decayed_run(64, NOW - 3 * DAY, NOW - 2 * DAY, NOW, h))
    assert "light" not in use  # 89 days ago; and the running run is squeue's
    with Session(engine) as s:
        assert finished_use(s, NOW, 0.0)["light"] == 8 * DAY  # no decay: everything


def test_a_team_that_used_little_lately_goes_first(engine: Engine) -> None:
    _ledger(engine)
    assert _started(engine, fair=False)[:2] == ["busy", "heavy1"]  # by ρ: heavy waited longer
    assert _started(engine, fair=True)[:2] == ["busy", "light1"]


def test_the_simulator_decides_alike_from_its_own_accounting() -> None:
    # the heavy team's history happens inside the simulator: it ran 64 GPUs for a day
    jobs = [TraceJob("past", 0.0, 64, DAY, account="heavy", tp=8),
            TraceJob("busy", DAY, 64, 60.0, account="other", tp=8),
            TraceJob("heavy1", DAY + 10, 64, 3600.0, account="heavy", tp=8),
            TraceJob("light1", DAY + 30, 64, 3600.0, account="light", tp=8)]

    def order(fair: bool) -> list[str]:
        sim = LiveSim(fabric_from_shape(8, 8, 2), jobs, start=0.0,
                      config=SimConfig(fair_share_half_life_s=7 * DAY))
        started: list[str] = []
        policy = Default(fair_share=fair)
        for t in (1.0, DAY + 1, DAY + 40, DAY + 70, DAY + 100):
            snap: Snapshot = sim.snapshot(t)
            if t == DAY + 40:
                heavy = snap.account("heavy").recent_gpu_s
                assert heavy == pytest.approx(decayed_run(64, 1.0, DAY + 1, t, 7 * DAY), rel=1e-3)
            d = decide(snap, policy, t, Random(0))
            sim.apply(list(d.actions), t)
            started += [a.job_id for a in d.actions if isinstance(a, Start)]
        return started

    assert order(False)[1:3] == ["busy", "heavy1"]
    assert order(True)[1:3] == ["busy", "light1"]


def test_the_half_life_comes_from_the_setting_then_slurm_then_slurms_default() -> None:
    text = "PriorityDecayHalfLife   = 7-00:00:00\nPriorityType = priority/multifactor\n"
    assert parse_half_life(text) == 7 * DAY
    assert parse_half_life("PriorityDecayHalfLife = 14:30:00") == 14.5 * 3600
    assert parse_half_life("PriorityDecayHalfLife = 00:00:00") == 0.0
    assert parse_half_life("PriorityType = priority/basic") is None
    assert parse_half_life("PriorityDecayHalfLife = bogus") is None
    assert half_life(3600.0, lambda: text) == 3600.0
    assert half_life(None, lambda: "PriorityDecayHalfLife = 1-00:00:00") == DAY
    assert half_life(None, lambda: None) == 7 * DAY == half_life(None, None)
    assert math.isfinite(half_life(None, lambda: "garbage"))
