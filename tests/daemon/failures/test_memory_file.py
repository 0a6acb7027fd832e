"""Failure counts per node survive a daemon restart (issue 33 item 3): the responder keeps them in
``failures.memory_file``; a restarted daemon continues the count and does not count again the
kills squeue still shows."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.flaky import FlakyRules, NodeStatus
from railgang.daemon.failures.persist import dump, load
from railgang.daemon.slurm.cli.runner import SlurmRunner
from tests.daemon.failures.harness import Responder
from tests.daemon.slurm.cli.test_failures_adapter import NODES, Launcher, job

RULES = FlakyRules(count=3, window_s=3600.0)


def responder(la: Launcher, path: Path | None) -> Responder:
    settings = FailureSettings(flaky_count=3, flaky_window_s=3600.0)
    return Responder(SlurmRunner(exec_fn=la, retries=0), settings, user="railgang",
                     memory_file=path)


def _drains(la: Launcher) -> list[tuple[str, ...]]:
    return [c for c in la.calls if c[:2] == ("scontrol", "update") and "State=DRAIN" in c]


def test_a_restarted_daemon_continues_the_count(tmp_path: Path) -> None:
    path = tmp_path / "failures.json"
    la = Launcher()
    first = responder(la, path)
    first.step([job("1", "NODE_FAIL")], NODES, 100.0)
    first.step([job("1", "NODE_FAIL"), job("2", "NODE_FAIL")], NODES, 200.0)
    assert _drains(la) == [] and path.exists()
    # restarted: squeue still shows both kills; they are not counted again, the third one drains
    again = responder(la, path)
    again.step([job("1", "NODE_FAIL"), job("2", "NODE_FAIL")], NODES, 300.0)
    assert _drains(la) == []
    again.step([job("1", "NODE_FAIL"), job("2", "NODE_FAIL"), job("3", "NODE_FAIL")], NODES, 400.0)
    assert len(_drains(la)) == 1 and _drains(la)[0][2] == "nodename=n03"
    assert "3 job failures" in _drains(la)[0][4]


def test_without_the_file_a_restart_starts_from_zero(tmp_path: Path) -> None:
    la = Launcher()
    first = responder(la, None)
    first.step([job("1", "NODE_FAIL"), job("2", "NODE_FAIL")], NODES, 200.0)
    again = responder(la, None)
    again.step([job("3", "NODE_FAIL")], NODES, 400.0)
    assert _drains(la) == []  # the behaviour this file exists to fix


def test_old_and_bad_entries_are_left_out(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = json.dumps({"version": 1,
                       "failures": {"n01": [10.0, 3000.0, 9e9], "n02": "x", "": [1.0],
                                    "n03": [float("nan")]},
                       "counted": [["7", 0], ["8"], [None, 1], ["9", -1]],
                       "running": {"5": [1, ["n01"]], "6": [1, [7]]}})
    memory, bad = load(text, 4000.0, RULES)
    assert memory.flaky.nodes["n01"].failures == (3000.0,)  # 10 s: past the window; 9e9: future
    assert set(memory.flaky.nodes) == {"n01"} and memory.flaky.status("n01") is NodeStatus.OK
    assert memory.counted == frozenset({("7", 0)}) and dict(memory.running) == {"5": (1, ("n01",))}
    assert bad == 6
    assert json.loads(dump(memory, 4000.0, RULES))["failures"] == {"n01": [3000.0]}
    with pytest.raises(ValueError):
        load(json.dumps({"version": 99}), 0.0, RULES)
    path = tmp_path / "failures.json"
    path.write_text("{not json")
    with caplog.at_level(logging.WARNING):
        r = responder(Launcher(), path)
        r.step([], NODES, 1.0)
    assert "failure memory" in caplog.text and r.held_out() == set()
