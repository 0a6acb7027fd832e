"""ρ as the simulator reports it, end to end: a three-job trace replayed through the real engine
and CLI, every number worked out by hand from the definition in docs/simulator.md
(ρ = JCT / T_ideal, T_ideal = duration · max(1, gpus / (C / N)), N = time-averaged jobs in the
system while the job was there)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.engine import simulate
from tests.daemon.sim.conftest import first_fit, tj

H = 3600.0
# One 8-GPU node, strict FIFO. a (8 GPUs, 1 h) runs 0-1 h; b (4 GPUs, 0.5 h, submitted at 0.1 h)
# and c (4 GPUs, 0.1 h, at 0.2 h) wait for it, start together at 1 h; c ends at 1.1 h, b at 1.5 h.
# Jobs in the system: 1 on [0, .1), 2 on [.1, .2), 3 on [.2, 1), 2 on [1, 1.1), 1 on [1.1, 1.5).
TRACE = [tj("a", 0.0, 8, H, account="x"), tj("b", 0.1 * H, 4, 0.5 * H, account="x"),
         tj("c", 0.2 * H, 4, 0.1 * H, account="y")]
# a: N = (.1·1 + .1·2 + .8·3) / 1 = 2.7; share 8/2.7; T_ideal = 1 h · 8/(8/2.7) = 2.7 h
RHO_A = 1.0 / 2.7
# b: N = (.1·2 + .8·3 + .1·2 + .4·1) / 1.4 = 3.2/1.4; share 3.5; T_ideal = .5 h · 4/3.5
RHO_B = 1.4 / (0.5 * 4 / 3.5)
# c: N = (.8·3 + .1·2) / .9 = 2.6/.9; share 8·.9/2.6; T_ideal = .1 h · 4 / share
RHO_C = 0.9 / (0.1 * 4 / (8 * 0.9 / 2.6))


def test_rho_per_job_from_the_engine(one_node: Any) -> None:
    result = simulate(TRACE, get("fifo"), one_node, placer=first_fit)
    recs = {r.job_id: r for r in result.records}
    assert [recs[j].start for j in "abc"] == [0.0, H, H]
    assert [recs[j].finish for j in "abc"] == pytest.approx([H, 1.5 * H, 1.1 * H])
    assert [recs[j].mean_jobs_in_system for j in "abc"] == pytest.approx(
        [2.7, 3.2 / 1.4, 2.6 / 0.9])
    assert [recs[j].rho(8) for j in "abc"] == pytest.approx([RHO_A, RHO_B, RHO_C])


def test_rho_distribution_big_jobs_and_accounts(one_node: Any) -> None:
    m = simulate(TRACE, get("fifo"), one_node, placer=first_fit).metrics
    rhos = sorted((RHO_A, RHO_B, RHO_C))  # 0.37, 2.45, 6.23
    assert (m.rho_p50, m.rho_max) == pytest.approx((rhos[1], rhos[2]))
    assert m.rho_p90 == pytest.approx(rhos[1] + 0.8 * (rhos[2] - rhos[1]))
    assert m.rho_share_above_2 == pytest.approx(2 / 3)
    # big = at least one GPU-hour: a (8 GPU-h) and b (2 GPU-h); c is 0.4 GPU-h
    assert m.big_jobs_finished == 2
    assert (m.rho_big_p50, m.rho_big_max) == pytest.approx(((RHO_A + RHO_B) / 2, RHO_B))
    assert m.rho_big_share_above_2 == pytest.approx(0.5)
    acc = {a.account: a for a in m.per_account}
    assert (acc["x"].rho_mean, acc["x"].max_rho) == pytest.approx(((RHO_A + RHO_B) / 2, RHO_B))
    assert (acc["x"].rho_p50, acc["x"].rho_p90) == pytest.approx(
        ((RHO_A + RHO_B) / 2, RHO_A + 0.9 * (RHO_B - RHO_A)))
    assert (acc["x"].rho_share_above_2, acc["x"].rho_big_max) == pytest.approx((0.5, RHO_B))
    assert (acc["y"].rho_p50, acc["y"].rho_share_above_2) == pytest.approx((RHO_C, 1.0))
    assert acc["y"].big_jobs_finished == 0


def test_cli_json_and_csv_carry_the_same_rho(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration_s,account\n"
                     + "".join(f"{j.job_id},{j.submit_time},{j.gpus},{j.duration_s},{j.account}\n"
                               for j in TRACE))
    out = tmp_path / "jobs.csv"
    result = CliRunner().invoke(app, ["sim", "--trace", str(trace), "--nodes", "1", "--leaf", "1",
                                      "--policy", "fifo", "--json", "--quiet",
                                      "--jobs-csv", str(out)])
    assert result.exit_code == 0, result.output
    fifo = json.loads(result.stdout)["results"]["fifo"]
    assert (fifo["rho_max"], fifo["rho_big_max"]) == pytest.approx((RHO_C, RHO_B))
    per = {a["account"]: a for a in fifo["per_account"]}
    assert per["y"]["rho_p90"] == pytest.approx(RHO_C)
    rows = {r["job_id"]: float(r["rho"]) for r in csv.DictReader(out.read_text().splitlines())}
    assert rows == pytest.approx({"a": RHO_A, "b": RHO_B, "c": RHO_C}, rel=1e-5)
