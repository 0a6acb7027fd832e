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
