"""Finish-time fairness as a distribution, and work conservation (idle GPUs while work that would
fit waits), on inputs small enough to compute by hand."""

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
from railgang.daemon.sim.metrics import JobRecord, compute
from tests.daemon.sim.conftest import first_fit, tj
from tests.daemon.sim.pin_diff import differences


def done(job_id: str, rho: float, *, big: bool, account: str) -> JobRecord:
    """A 1-GPU job alone on 8 GPUs (N = 1, so T_ideal = duration): JCT = rho x duration."""
    duration = 3600.0 if big else 60.0
    return JobRecord(job_id=job_id, account=account, gpus=1, submit=0.0, duration_s=duration,
                     start=0.0, finish=rho * duration)


def test_rho_distribution_all_big_and_per_account() -> None:
    records = [done("b1", 1.0, big=True, account="x"), done("b3", 3.0, big=True, account="x"),
               done("b5", 5.0, big=True, account="x"), done("b15", 1.5, big=True, account="y"),
               done("b2", 2.0, big=True, account="y"), done("s1", 1.0, big=False, account="y"),
               done("s4", 4.0, big=False, account="y"),
               JobRecord(job_id="u", account="x", gpus=8, submit=0.0, duration_s=7200.0)]
    m = compute(records, cluster_gpus=8)
    # all finished: [1, 1, 1.5, 2, 3, 4, 5]; linear interpolation between closest ranks
    assert (m.rho_p50, m.rho_p90, m.rho_p99, m.rho_max) == pytest.approx((2.0, 4.4, 4.94, 5.0))
    assert m.rho_share_above_2 == pytest.approx(3 / 7)
    # jobs of at least one GPU-hour: [1, 1.5, 2, 3, 5] (the unfinished one is not timed)
    assert m.big_jobs_finished == 5
    assert (m.rho_big_p50, m.rho_big_p90, m.rho_big_p99, m.rho_big_max) == pytest.approx(
        (2.0, 4.2, 4.92, 5.0))
    assert m.rho_big_share_above_2 == pytest.approx(2 / 5)
    acc = {a.account: a for a in m.per_account}
    assert (acc["x"].rho_mean, acc["x"].rho_p99, acc["x"].max_rho) == pytest.approx(
        (3.0, 4.96, 5.0))
    assert (acc["y"].rho_mean, acc["y"].max_rho) == pytest.approx((8.5 / 4, 4.0))


def test_fifo_head_of_line_idles_gpus_charged_to_priority(one_node: Any) -> None:
    # a holds 4 of 8 GPUs until 100; b (8 GPUs) heads the queue; c (4 GPUs) would fit from t=2
    jobs = [tj("a", 0, 4, 100.0, account="red"), tj("b", 1, 8, 10.0, account="red"),
            tj("c", 2, 4, 10.0, account="blue")]
    result = simulate(jobs, get("fifo"), one_node, placer=first_fit)
    recs = {r.job_id: r for r in result.records}
    assert recs["c"].idle_fit_gpu_s == {"priority": 4 * 98.0}
    assert recs["b"].idle_fit_gpu_s == {}  # needs 8, only 4 free: not idle "for" it
    m = result.metrics
    assert m.idle_while_waiting_by_reason == pytest.approx({"priority": 392 / 3600})
    assert m.idle_while_waiting_gpu_h == m.idle_while_waiting_placeable_gpu_h
    acc = {a.account: a.idle_while_waiting_gpu_h for a in m.per_account}
    assert acc == pytest.approx({"blue": 392 / 3600, "red": 0.0})


def test_backfill_reservation_idles_gpus_charged_to_reserved(one_node: Any) -> None:
    # slurm (EASY backfill): b holds the reservation at t=100; c (200 s) would delay it
    jobs = [tj("a", 0, 4, 100.0), tj("b", 1, 8, 10.0), tj("c", 2, 4, 200.0)]
    result = simulate(jobs, get("slurm"), one_node, placer=first_fit)
    recs = {r.job_id: r for r in result.records}
    assert (recs["c"].start, recs["c"].finish) == (110.0, 310.0)
    assert recs["c"].idle_fit_gpu_s == {"reserved": 4 * 98.0}
    # a short c backfills at once: nothing idles while it waits
    short = simulate([*jobs[:2], tj("c", 2, 4, 10.0)], get("slurm"), one_node, placer=first_fit)
    assert short.metrics.idle_while_waiting_gpu_h == 0.0


def test_pin_diff_tolerates_new_keys_and_catches_changes() -> None:
    old = {"r": {"metrics": {"m": 1.0, "per_account": [{"a": 1}]}, "jobs": [["j", 0.0, 5.0]]}}
    new = {"r": {"metrics": {"m": 1.0, "n": 2, "per_account": [{"a": 1, "b": 2}]},
                 "jobs": [["j", 0.0, 5.0]]}}
    assert differences(old, new) == ([], {"n"})
    moved = {"r": {"metrics": new["r"]["metrics"], "jobs": [["j", 0.0, 6.0]]}}
    assert differences(old, moved)[0] == ["r: jobs differs"]


def test_cli_json_table_and_csv_report_both(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_time,gpus,duration_s,account\n"
                     "a,0,4,100,red\nb,1,8,10,red\nc,2,4,10,blue\n")
    args = ["sim", "--trace", str(trace), "--nodes", "1", "--leaf", "1", "--quiet"]
    result = CliRunner().invoke(app, [*args, "--policy", "fifo", "--json"])
    assert result.exit_code == 0, result.output
    fifo = json.loads(result.stdout)["results"]["fifo"]
    assert fifo["idle_while_waiting_by_reason"] == pytest.approx({"priority": 392 / 3600})
    assert fifo["rho_p50"] is not None and "rho_big_p99" in fifo
    out = tmp_path / "jobs.csv"
    result = CliRunner().invoke(app, [*args, "--compare", "fifo,slurm", "--jobs-csv", str(out)])
    assert result.exit_code == 0, result.output
    assert "finish-time fairness" in result.stdout and "idle while a waiting job" in result.stdout
    rows = {(r["policy"], r["job_id"]): r for r in csv.DictReader(out.read_text().splitlines())}
    assert float(rows["fifo", "c"]["idle_while_waiting_gpu_h"]) == pytest.approx(392 / 3600, abs=1e-6)
    assert rows["fifo", "a"]["rho"] != ""
