"""``--failures``: node and leaf faults kill the jobs on them, which restart from their last
checkpoint; the process is seeded per domain, the same for every policy; checkpoints cost time."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from railgang.daemon.cli.main import app
from railgang.daemon.core.policies import registry
from railgang.daemon.failures.rates import FailureRates
from railgang.daemon.failures.young_daly import young_daly_s
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.sim.config import SimConfig
from railgang.daemon.sim.engine import EngineConfig, RunResult, simulate
from railgang.daemon.sim.failures import FailureConfig
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape

FABRIC = fabric_from_shape(8, 8, 4)  # two leaves of four nodes
HOUR = 3600.0


def _run(jobs: list[TraceJob], rates: FailureRates | None, *, policy: str = "fifo",
         interval: str = "fixed", charge: bool = True, seed: int = 0,
         sim: SimConfig = SimConfig()) -> RunResult:
    failures = None if rates is None else FailureConfig(rates=rates, seed=seed, charge=charge,
                                                        interval=interval)  # type: ignore[arg-type]
    return simulate(jobs, registry.get(policy), FABRIC,
                    config=EngineConfig(sim=sim, failures=failures))


def test_no_failure_no_checkpoint_cost_is_the_plain_replay() -> None:
    jobs = [TraceJob("a", 0.0, 16, 10 * HOUR), TraceJob("b", 60.0, 8, 2 * HOUR)]
    plain = _run(jobs, None)
    quiet = _run(jobs, FailureRates(0.0, 0.0, 0.0), charge=False)
    assert [(r.job_id, r.finish) for r in plain.records] == [(r.job_id, r.finish) for r in quiet.records]


def test_checkpoint_cost_slows_a_job_by_cost_over_interval() -> None:
    run = _run([TraceJob("a", 0.0, 8, 10 * HOUR)], FailureRates(0.0, 0.0, 0.0),
               sim=SimConfig(checkpoint_interval_s=600.0, checkpoint_cost_s=60.0))
    (rec,) = run.records
    assert rec.finish == pytest.approx(10 * HOUR / 0.9)


def test_a_node_failure_kills_the_job_which_restarts_from_its_checkpoint() -> None:
    rates = FailureRates(0.0, 0.5, 0.0, repair_s=600.0)  # a node fails about every 2 h
    sim = SimConfig(checkpoint_interval_s=900.0, checkpoint_cost_s=0.0, restore_cost_s=120.0)
    run = _run([TraceJob("a", 0.0, 32, 6 * HOUR)], rates, sim=sim)
    assert run.failures is not None
    (rec,) = run.records
    hits = [f for f in run.failures.log if "a" in f.jobs]
    assert hits, "some node under the job failed"
    assert rec.interruptions == len(hits) and rec.finish is not None
    # each kill loses at most one interval of work, and each restart its restore time
    assert rec.finish - 6 * HOUR <= len(hits) * (900.0 + 120.0) + 1e-6
    assert rec.finish - 6 * HOUR >= len(hits) * 120.0 - 1e-6
    assert run.failures.node_s_out > 0


def test_a_leaf_failure_takes_every_node_of_the_leaf() -> None:
    rates = FailureRates(0.0, 0.0, 0.2, leaf_repair_s=HOUR)
    run = _run([TraceJob("a", 0.0, 8, 20 * HOUR)], rates)
    assert run.failures is not None and run.failures.log
    for f in run.failures.log:
        assert f.domain in FABRIC.switches and len(f.nodes) == 4
        assert {FABRIC.leaf_of(n) for n in f.nodes} == {f.domain}


def test_every_policy_meets_the_same_faults() -> None:
    jobs = [TraceJob(f"j{i}", i * 600.0, 8 * (1 + i % 3), (2 + i % 5) * HOUR) for i in range(12)]
    rates = FailureRates(0.0, 0.05, 0.0, repair_s=HOUR)
    logs = []
    for policy in ("fifo", "default"):
        run = _run(jobs, rates, policy=policy, seed=7)
        assert run.failures is not None
        logs.append([(f.at, f.domain) for f in run.failures.log])
        assert all(r.finish is not None for r in run.records)
    n = min(len(logs[0]), len(logs[1]))
    assert n > 0 and logs[0][:n] == logs[1][:n]
    assert _run(jobs, rates, seed=7).failures.log == _run(jobs, rates, seed=7).failures.log  # type: ignore[union-attr]


def test_advised_interval_is_young_daly_for_the_jobs_size() -> None:
    rates = FailureRates(0.0, 0.5, 0.0)
    sim = SimConfig(checkpoint_interval_s=1800.0, checkpoint_cost_s=30.0)
    jobs = [TraceJob("small", 0.0, 8, 1000.0), TraceJob("big", 0.0, 32, 1000.0)]
    seen: dict[str, float] = {}

    def watch(now: float, backend: SimBackend) -> None:
        for jid, sj in backend.running.items():
            seen[jid] = sj.request.checkpoint_interval_s

    config = EngineConfig(sim=sim, failures=FailureConfig(rates=rates, interval="advised"))
    simulate(jobs, registry.get("fifo"), FABRIC, config=config, observer=watch)
    assert seen["small"] == pytest.approx(young_daly_s(30.0, rates.mtbf_s(1, 8, 1)))
    assert seen["big"] == pytest.approx(young_daly_s(30.0, rates.mtbf_s(4, 8, 1)))
    assert seen["big"] < seen["small"] < 1800.0
    rare = EngineConfig(sim=sim, failures=FailureConfig(rates=FailureRates(0.0, 1e-4, 0.0),
                                                        interval="advised"))
    seen.clear()
    simulate(jobs, registry.get("fifo"), FABRIC, config=rare, observer=watch)
    assert seen == {"small": 1800.0, "big": 1800.0}  # never longer than the fixed interval


def test_the_replay_ends_when_the_work_is_done() -> None:
    run = _run([TraceJob("a", 0.0, 8, HOUR)], FailureRates(0.0, 1e-3, 1e-3))
    assert run.records[0].finish is not None
    assert run.ended_at is not None and math.isfinite(run.ended_at)


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    rows = [f"j{i},{i * 300},{8 * (1 + i % 2)},{7200 + 600 * i},acc" for i in range(10)]
    path.write_text("job_id,submit_time,gpus,duration_s,account\n" + "\n".join(rows) + "\n")
    return path


def test_cli_reports_failures_in_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "sim", "--trace", str(_trace(tmp_path)), "--nodes", "8", "--leaf", "4", "--json", "-q",
        "--failures", "llama3,scale=2000,repair=30m", "--checkpoint-s", "advised",
        "--checkpoint-cost-s", "10", "--restart-s", "60"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["results"]["default"]["failures"]
    assert summary["failures"] > 0 and summary["jobs_killed"] > 0


@pytest.mark.parametrize(("args", "message"), [
    (["--failures", "llama4"], "--failures"),
    (["--failures", "gpu=nan"], "--failures"),
    (["--checkpoint-s", "advised"], "needs --failures"),
    (["--checkpoint-s", "0"], "longer than 0"),
    (["--checkpoint-s", "soon"], "--checkpoint-s"),
    (["--failures", "llama3", "--failure-detect-s", "nan"], "--failure-detect-s"),
    (["--failure-detect-s", "5"], "needs --failures"),
], ids=["unknown", "nan-rate", "advised-alone", "zero-interval", "bad-interval", "nan-detect",
        "detect-alone"])
def test_cli_refuses_bad_options_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["sim", "--trace", str(_trace(tmp_path)), "-q", *args])
    assert result.exit_code != 0
    text = str(result.exception) if result.exception is not None else result.output
    assert message in text and "\n" not in text.strip()


def test_a_fault_kill_is_no_preemption_for_the_core() -> None:
    """The core's cascade damping (an evicted job may not evict others for 30 min) must not
    stop a gang the fault killed from taking its nodes back."""
    rates = FailureRates(0.0, 0.5, 0.0, repair_s=600.0)
    states = []

    def watch(now: float, backend: SimBackend) -> None:
        sj = backend.jobs.get("a")
        if sj is not None:
            states.append(sj.job.state)

    config = EngineConfig(failures=FailureConfig(rates=rates))
    run = simulate([TraceJob("a", 0.0, 32, 6 * HOUR)], registry.get("fifo"), FABRIC,
                   config=config, observer=watch)
    assert run.records[0].interruptions > 0 and states
    assert all(s.preemptions == 0 and s.last_preempted_at is None for s in states)


def test_a_second_fault_while_the_first_is_detected_does_not_postpone_the_kill() -> None:
    rates = FailureRates(0.0, 2.0 / 8, 0.0, repair_s=60.0)  # faults close together
    config = EngineConfig(failures=FailureConfig(rates=rates, detect_s=900.0))
    run = simulate([TraceJob("a", 0.0, 64, 4 * HOUR)], registry.get("fifo"), FABRIC,
                   config=config)
    assert run.failures is not None
    hits = [f.at for f in run.failures.log if "a" in f.jobs]
    assert hits and all(b - a >= 900.0 for a, b in itertools.pairwise(hits))
    assert run.records[0].interruptions == len(hits)


def test_llama3_rates_give_about_419_failures_in_54_days_on_the_llama3_fleet() -> None:
    """The calibration, end to end: 2,048 nodes x 8 GPUs in leaves of 32 for 54 days."""
    from railgang.daemon.failures.rates import LLAMA3
    from railgang.daemon.sim.engine import Bounds

    fleet = fabric_from_shape(2048, 8, 32)
    days = 54 * 86400.0
    run = simulate([TraceJob("a", 0.0, 8, 2 * days)], registry.get("fifo"), fleet,
                   config=EngineConfig(failures=FailureConfig(rates=LLAMA3, seed=3)),
                   bounds=Bounds(until=days))
    assert run.failures is not None
    log = run.failures.log
    assert 419 - 3 * 21 <= len(log) <= 419 + 3 * 21  # Poisson: sigma = sqrt(419) ~ 20.5
    leaves = sum(1 for f in log if len(f.nodes) == 32)
    assert 35 - 3 * 6 <= leaves <= 35 + 3 * 6
