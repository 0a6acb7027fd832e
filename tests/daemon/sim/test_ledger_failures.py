"""``sim --ledger --failures`` keeps what happened (issue 36 item 3): the replay that writes the
ledger meets the same faults as the one summarised (its failure process was bound to a backend
swapped out before the replay, so every job was stored COMPLETED with no fault at all), failed
nodes are down in ``node_states`` from the fault to the repair (Slurm's "Not responding"), and
the report counts the runs a fault ended as restarts after a fault, not as preemptions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from typer.testing import CliRunner

from railgang.daemon.cli.main import app

TRACE = "job_id,submit_time,gpus,duration_s,account\n" + "".join(
    f"j{i},{i * 1800},{1 + i % 4},{7200 + 600 * i},{'ab'[i % 2]}\n" for i in range(12))


def test_failures_reach_the_ledger_and_the_report(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(TRACE)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    res = CliRunner().invoke(app, [
        "sim", "--trace", str(trace), "--nodes", "2", "--gpus-per-node", "4", "--leaf", "2",
        "-q", "--telemetry-interval-s", "300", "--failures", "llama3,scale=300",
        "--ledger", url, "--ledger-start", "2026-11-23"])
    assert res.exit_code == 0, (res.output, res.exception)
    said = re.search(r"(\d+) failures .*killed (\d+) job run", res.output.replace("\n", " "))
    assert said is not None, res.output
    killed = int(said.group(2))
    assert killed > 0

    eng = create_engine(url)
    with eng.connect() as c:
        rows = c.execute(text("SELECT node, at_epoch, state, reason FROM node_states "
                              "ORDER BY node, at_epoch")).all()
        runs: dict[str, int] = dict(c.execute(text(
            "SELECT j.slurm_job_id, count(*) FROM usage_records u JOIN jobs j "
            "ON j.id = u.job_id GROUP BY j.slurm_job_id")).all())
    eng.dispose()
    down = [r for r in rows if r.state == "down"]
    assert down and {r.reason for r in down} == {"Not responding"}
    for node in {r.node for r in rows}:  # every node starts idle; a repair brings it back
        mine = [r.state for r in rows if r.node == node]
        assert mine[0] == "idle"
    assert sum(n - 1 for n in runs.values()) >= killed  # each killed run is a segment of its own

    monkeypatch.setenv("RAILGANG_CONFIG", "")
    monkeypatch.setenv("RAILGANG_DB__URL", url)
    rep = CliRunner().invoke(app, ["report", "--date", "2026-11-23", "--json"])
    assert rep.exit_code == 0, rep.output
    data = json.loads(rep.output)
    # the replay has no preemptions (no class-0 work): every break is a fault's restart
    assert data["chaos"]["fault_restarts"] == killed and data["chaos"]["preemptions"] == 0
    assert data["nodes_down"] and {r["state"] for r in data["nodes_down"]} == {"down"}
    # capacity as sreport splits it (issue 36 item 2): the down hours are taken out of idle
    t = data["totals"]
    assert t["down_gpu_h"] > 0 and t["drained_gpu_h"] == 0 == t["reserved_gpu_h"]
    assert t["capacity_gpu_h"] == pytest.approx(8 * 24)  # 2 nodes x 4 GPUs, all day
    assert t["allocated_gpu_h"] + t["down_gpu_h"] + t["idle_gpu_h"] == pytest.approx(
        t["capacity_gpu_h"], abs=0.01)
