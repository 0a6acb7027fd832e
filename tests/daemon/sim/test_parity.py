"""Parity (issue 34, invariant): for a short seeded trace with failures, the daemon's cycle
(``cycle_of(settings)``: its steps, its ``CycleConfig``, its policy, run by ``loop.run_cycle``) on
``SimBackend`` and ``railgang sim --config`` with the same settings produce the same journal of
actions. The world (trace, cluster, failure process, progress model) is the one the command
built; only the decisions are built twice, once the daemon's way and once the command's."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from railgang.daemon.backend import ActionResult
from railgang.daemon.cli.main import app
from railgang.daemon.config import load_settings
from railgang.daemon.core.model.actions import Action, DrainNode, Requeue, SubmitBurnIn
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.cycle_settings import cycle_of
from railgang.daemon.pipeline import Pipeline
from railgang.daemon.sim import replay as sim_replay
from railgang.daemon.sim.engine import EngineConfig, RunResult, simulate

SETTINGS = """
[daemon]
policy = "default"
seed = 7
cycle_interval_s = 300  # both ways decide on this timer; 10 s would tick 10x more for nothing

[failures]
flaky_count = 2
"""


class Journal:
    def __init__(self) -> None:
        self.rows: list[tuple[float, Action, bool, str]] = []
        self._planned: list[Action] = []

    def observed(self, snapshot: Snapshot, now: float) -> None:
        pass

    def planned(self, actions: Sequence[Action], now: float) -> None:
        self._planned = list(actions)

    def settled(self, results: Sequence[ActionResult], now: float) -> None:
        self.rows += [(now, r.action, r.ok, r.detail) for r in results]


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    rows = [f"j{i},{i * 600},{8 * (1 + i % 3)},{3 * 3600 + 900 * i},acc" for i in range(12)]
    path.write_text("job_id,submit_time,gpus,duration_s,account\n" + "\n".join(rows) + "\n")
    return path


def test_the_daemons_cycle_and_railgang_sim_journal_the_same_actions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings_file = tmp_path / "railgang.toml"
    settings_file.write_text(SETTINGS)
    seen: list[tuple[Sequence[Any], Any, Any, EngineConfig, Any]] = []
    sim_journal = Journal()

    def recorded(jobs: Sequence[Any], policy: Any, fabric: Any, *, config: EngineConfig,
                 **kw: Any) -> RunResult:
        seen.append((jobs, policy, fabric, config, kw.get("comm")))
        return simulate(jobs, policy, fabric, config=config, journal=sim_journal, **kw)

    monkeypatch.setattr(sim_replay, "simulate", recorded)
    result = CliRunner().invoke(app, [
        "--config", str(settings_file), "sim", "--trace", str(_trace(tmp_path)), "--nodes", "8",
        "--leaf", "4", "--json", "-q", "--failures", "llama3,scale=3000,repair=1h"])
    assert result.exit_code == 0, result.output
    (jobs, _, fabric, world, comm), = seen

    # the daemon's way: everything the cycle decides with comes from cycle_of(settings)
    cycle = cycle_of(load_settings(settings_file))
    daemon_journal = Journal()
    simulate(jobs, cycle.policy, fabric, comm=comm, journal=daemon_journal,
             config=dataclasses.replace(world, cycle=cycle.config,
                                        steps=lambda: Pipeline(cycle.steps.steps)))

    kinds = {type(a) for _, a, _, _ in daemon_journal.rows}
    assert {Requeue, DrainNode, SubmitBurnIn} <= kinds  # the failure step acted
    assert len(daemon_journal.rows) > 20
    assert all(ok for _, _, ok, _ in daemon_journal.rows)  # both backends carried them out
    assert sim_journal.rows == daemon_journal.rows


SERVING_SETTINGS = SETTINGS + """
[serving]
lend_to_rigid = true
"""


class _Both:
    """Two journals fed the same cycles (the replay's own take-back count and the test's)."""

    def __init__(self, *journals: Any) -> None:
        self.journals = journals

    def observed(self, snapshot: Snapshot, now: float) -> None:
        for j in self.journals:
            j.observed(snapshot, now)

    def planned(self, actions: Sequence[Action], now: float) -> None:
        for j in self.journals:
            j.planned(actions, now)

    def settled(self, results: Sequence[ActionResult], now: float) -> None:
        for j in self.journals:
            j.settled(results, now)


def test_with_a_serving_deployment_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``railgang sim --serving`` runs the daemon's serving step (issue 34 item 3): the daemon's
    cycle (``cycle_of(settings, serving=reader)``: the failure step, the serving step, the core)
    on the same world journals the same actions: replicas started and drained, borrowers taken
    back, nodes drained for faults."""
    from railgang.daemon.core.model.actions import Preempt, Start
    from railgang.daemon.serving.replay import SimServing
    from railgang.daemon.serving.synth import DemandShape, demand_series, write_csv
    from railgang.daemon.sim import engine

    settings_file = tmp_path / "railgang.toml"
    settings_file.write_text(SERVING_SETTINGS)
    demand = tmp_path / "demand.csv"
    write_csv(demand, [("chat", 8, 900.0, demand_series(DemandShape(low=1, peak=6, noise=0.03),
                                                          9, 1800.0, seed=2))], 1800.0)
    trace = tmp_path / "t.csv"
    rows = [f"j{i},{i * 1500},{8 * (1 + i % 2)},{4 * 3600 + 600 * i},acc" for i in range(60)]
    trace.write_text("job_id,submit_time,gpus,duration_s,account\n" + "\n".join(rows) + "\n")
    seen: list[dict[str, Any]] = []
    sim_journal = Journal()
    real = engine.simulate

    def recorded(jobs: Sequence[Any], policy: Any, fabric: Any, **kw: Any) -> RunResult:
        seen.append({"jobs": jobs, "fabric": fabric, **kw})
        return real(jobs, policy, fabric, **{**kw, "journal": _Both(kw["journal"], sim_journal)})

    monkeypatch.setattr(engine, "simulate", recorded)
    result = CliRunner().invoke(app, [
        "--config", str(settings_file), "sim", "--trace", str(trace), "--nodes", "4",
        "--leaf", "4", "--json", "-q", "--serving", str(demand), "--serving-history-days", "7",
        "--cycle-s", "0", "--tick-s", "0",  # a cycle at each change: the drains this test needs
        "--serving-modes", "forecast", "--failures", "llama3,scale=3000,repair=1h"])
    assert result.exit_code == 0, result.output
    (run,) = seen
    used: SimServing = run["capacity"]
    assert used.knobs.lend_rigid  # the file's [serving]

    fresh = SimServing(used.sset, used.mode, used.knobs, used.declared, used.gpn, used.expected)

    class Clock:  # the plan steps' cycles, without the replay's own serving step
        events, apply = fresh.events, fresh.apply

    cycle = cycle_of(load_settings(settings_file), serving=fresh)
    daemon_journal = Journal()
    world: EngineConfig = run["config"]
    real(run["jobs"], cycle.policy, run["fabric"], comm=run["comm"], journal=daemon_journal,
         capacity=Clock(), observer=fresh.observe,
         config=dataclasses.replace(world, cycle=cycle.config, steps=lambda: Pipeline(
             cycle.steps.steps, readers=cycle.steps.readers)))

    acts = [a for _, a, _, _ in daemon_journal.rows]
    replicas = {a.job_id for a in acts if isinstance(a, Start) and a.job_id.startswith("serve-")}
    assert replicas and any(isinstance(a, Preempt) and a.job_id in replicas for a in acts)
    assert any(isinstance(a, Preempt) and a.job_id.startswith("j") for a in acts)  # take-backs
    assert {Requeue, DrainNode} <= {type(a) for a in acts}  # the failure step acted too
    assert sim_journal.rows == daemon_journal.rows
