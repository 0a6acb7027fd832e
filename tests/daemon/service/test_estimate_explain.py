"""The start-time estimate end to end: the daemon's cycle estimates the queue, the explanation
rows carry it, and ``railgang explain`` (in process and as the installed command) shows it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import Engine

from railgang.daemon.clock import SimClock
from railgang.daemon.config import load_settings
from railgang.daemon.service.estimate import EstimateConfig, StartEstimator
from railgang.daemon.service.status import explanation, render
from railgang.daemon.sim.live import LiveSim
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.service.conftest import JOBS, service

RAILGANG = str(Path(sys.executable).with_name("railgang"))


def test_the_daemon_writes_estimates_that_explain_shows(engine: Engine) -> None:
    t0 = float(int(time.time()))  # wall-clock epochs, as the daemon's: explain shows ages
    clock = SimClock(t0)
    est = StartEstimator("fifo", config=EstimateConfig(wall_s=5.0), interval_s=60.0)
    svc = service(engine, LiveSim(fabric_from_shape(8, 8, 2), JOBS, start=t0), clock,
                  estimator=est)
    svc.run_once()
    settings = load_settings(db={"url": engine.url.render_as_string(hide_password=False)})
    wait = explanation(settings, "zbig")
    e = wait["estimate"]
    # zbig needs all 64 GPUs: a, b, c, d (one hour of work each, known to the simulator) end at
    # 3,600 s
    assert e["status"] == "estimated" and e["start_s"] == 3600.0 and e["start_at"] == t0 + 3600
    assert e["p10_s"] == e["p90_s"] == 3600.0 and e["simulations"] == 9
    # the estimate runs on the cycle's own snapshot, taken before this cycle started anything:
    # all five jobs were queued, their run times known (the simulated cluster reports progress)
    assert e["remaining_from"] == {} and e["run_time_from"] == {"progress": 5}
    assert e["policy"] == "fifo"
    text = render(wait)
    assert "expected start: in 60 min (p10-p90 in 60 min from the estimate" in text, text
    assert "9 simulations of the fifo policy; queued jobs' run time from progress 5" in text
    assert "estimate" not in explanation(settings, "a")  # running jobs get no estimate
    clock.advance(30.0)  # not due: the same estimate, no rewrite of the row
    svc.run_once()
    assert explanation(settings, "zbig")["estimate"]["as_of"] == t0
    clock.advance(30.0)
    svc.run_once()
    again = explanation(settings, "zbig")["estimate"]
    assert again["as_of"] == t0 + 60 and again["start_s"] == 3540.0
    assert again["remaining_from"] == {"progress": 4} and again["run_time_from"] == {"progress": 1}
    assert "running jobs' remaining time from progress 4" in render(
        explanation(settings, "zbig"))


def test_railgang_explain_shows_the_estimate(tmp_path: Path) -> None:
    env = {**os.environ, "RAILGANG_CONFIG": "",
           "RAILGANG_DB__URL": f"sqlite:///{tmp_path / 'rg.sqlite'}",
           "RAILGANG_SLURM__BACKEND": "sim", "RAILGANG_DEVCLUSTER__NODES": "2",
           "RAILGANG_DEVCLUSTER__NODES_PER_LEAF": "2",
           "RAILGANG_DAEMON__DEMO_JOBS": "30", "RAILGANG_DAEMON__POLICY": "default",
           "RAILGANG_DAEMON__METRICS_PORT": "0",
           "RAILGANG_DAEMON__HEARTBEAT_FILE": str(tmp_path / "hb"),
           "RAILGANG_LEDGER__GRANTS_FILE": str(tmp_path / "grants"),
           "RAILGANG_DAEMON__ESTIMATE_WALL_S": "5"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([RAILGANG, *args], env=env, capture_output=True, text=True,
                              timeout=120)

    ran = cli("daemon", "run", "--once", "--log-format", "json")
    assert ran.returncode == 0, ran.stderr
    settings = load_settings(db={"url": env["RAILGANG_DB__URL"]})
    shown = [explanation(settings, f"demo-{i}") for i in range(1, 11)]  # what the CLI reads
    waiting = [e for e in shown if e.get("state") == "waiting"]
    assert waiting, shown  # 10 jobs of up to 16 GPUs queued at once on 16 GPUs: some wait
    first = json.loads(cli("explain", waiting[0]["job_id"], "--json").stdout)
    assert first["estimate"] == {**waiting[0]["estimate"], "age_s": first["estimate"]["age_s"]}
    for e in waiting:
        est = e["estimate"]
        assert est["status"] == "estimated", est  # every demo job fits and runs minutes
        assert 0 < est["start_s"] <= 3600 and est["p10_s"] <= est["start_s"] <= est["p90_s"]
        # one cycle ran, on a snapshot from before its starts: every job was queued then
        assert est["remaining_from"] == {} and set(est["run_time_from"]) == {"progress"}
        assert est["policy"] == "default" and est["age_s"] >= 0
    text = cli("explain", waiting[0]["job_id"])
    assert text.returncode == 0 and "  expected start: in " in text.stdout, text.stdout
    assert "simulations of the default policy" in text.stdout


def test_the_calibration_is_stored_as_jobs_start_and_read_back_by_a_new_daemon(
        engine: Engine) -> None:
    from railgang.daemon.service.estimate_history import stored_scores, with_ledger_history
    from railgang.db.session import session_scope

    t0 = float(int(time.time()))
    clock = SimClock(t0)
    est = with_ledger_history(StartEstimator("fifo", config=EstimateConfig(wall_s=5.0)), engine,
                              cluster="railgang")
    assert est is not None and est.calibration.scores == 0
    svc = service(engine, LiveSim(fabric_from_shape(8, 8, 2), JOBS, start=t0), clock,
                  estimator=est)
    svc.run_once()  # zbig is shown [3,600 s, 3,600 s]
    for _ in range(3):  # a, b, c, d end at 3,600 s; zbig starts at the next cycle
        clock.advance(1830.0)
        svc.run_once()
    with session_scope(engine) as s:
        scores = stored_scores(s, cluster="railgang", limit=100)
    assert len(scores) >= 1 and est.calibration.scores == len(scores)
    # fifo starts them as predicted, seen at the first cycle after: at most one cycle late
    assert min(scores) <= 0.0 and max(scores) < math.log((3600 + 60 + 1830) / (3600 + 60))
    restarted = with_ledger_history(StartEstimator("fifo"), engine, cluster="railgang")
    assert restarted is not None and restarted.calibration.scores == len(scores)
    other = with_ledger_history(StartEstimator("fifo"), engine, cluster="elsewhere")
    assert other is not None and other.calibration.scores == 0
