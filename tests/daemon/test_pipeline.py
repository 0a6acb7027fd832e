"""The cycle's pipeline (issue 34 items 1-2): decisions are steps between the core and its
shells, backends only read and carry out. Invariants held here:

- nothing under ``daemon/slurm/`` or ``daemon/sim/`` imports the failure responder or the
  serving controller (an import graph of their modules);
- ``run_cycle`` takes no feature hook (its parameters are pinned);
- every action type is applied by both backends, and the journal encodes it;
- ``CliBackend.observe`` only reads: the requeues, drains and burn-ins of a node failure are the
  failure step's actions, carried out by ``apply``.
"""

from __future__ import annotations

import ast
import inspect
import json
import random
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from railgang.daemon.backend import ActionResult
from railgang.daemon.clock import SimClock
from railgang.daemon.config import SlurmSettings
from railgang.daemon.core.model.actions import (
    Action,
    DrainNode,
    Migrate,
    Preempt,
    ReleaseBurnIn,
    Requeue,
    Resize,
    Resume,
    SetPriority,
    Start,
    SubmitBurnIn,
    TagNode,
)
from railgang.daemon.core.policies.registry import get
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.failures.step import FailureMemory, FailureStep
from railgang.daemon.loop import run_cycle
from railgang.daemon.pipeline import Pipeline
from railgang.daemon.service.codec import KINDS, decode, encode, kind_of
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.slurm.cli import CliBackend
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.slurm.cli.capture import DATA, NOW
from tests.daemon.slurm.cli.test_hostile_output import RUNNING, squeue_text, with_

ROOT = Path(__file__).resolve().parents[2] / "railgang" / "daemon"
DECISIONS = ("railgang.daemon.failures.respond", "railgang.daemon.failures.step",
             "railgang.daemon.failures.flaky", "railgang.daemon.failures.adopt",
             "railgang.daemon.failures.persist", "railgang.daemon.failures.detect",
             "railgang.daemon.serving.controller", "railgang.daemon.serving.live")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("room", ["slurm", "sim"])
def test_no_backend_imports_a_decision_of_the_pipeline(room: str) -> None:
    files = sorted((ROOT / room).rglob("*.py"))
    assert files
    bad = {f"{p.relative_to(ROOT)}: {m}" for p in files for m in _imports(p)
           if m.startswith(DECISIONS)}
    assert bad == set()


def test_run_cycle_takes_no_feature_hook() -> None:
    assert list(inspect.signature(run_cycle).parameters) == [
        "backend", "policy", "clock", "rng", "config", "placer", "journal", "quotas", "health",
        "preemptions", "recent_use", "steps"]


ALL = typing.get_args(Action)
SAMPLES: dict[type[Any], Action] = {
    Start: Start("9", {"n01": (0, 1)}, 1), Resize: Resize("9", 1, {"n01": (0,)}, 2),
    Preempt: Preempt("9", 30.0), Migrate: Migrate("9", 30.0, {"n02": (0,)}, 1),
    SetPriority: SetPriority("9", 5), DrainNode: DrainNode("n01", "railgang: test"),
    TagNode: TagNode("n01", "lame"), Requeue: Requeue("9", "hung"),
    SubmitBurnIn: SubmitBurnIn("n01"), ReleaseBurnIn: ReleaseBurnIn("n01", "passed"),
    Resume: Resume("n01", "into its reservation")}
UNHANDLED = ("unsupported action", "unknown action", "failure handling is off")


def test_every_action_type_has_a_sample_and_a_journal_kind() -> None:
    assert set(SAMPLES) == set(ALL) == set(KINDS.values())
    for action in SAMPLES.values():
        assert decode(kind_of(action), encode(action)) == action


@pytest.mark.parametrize("kind", [t.__name__ for t in ALL])
def test_the_simulator_applies_every_action_type(kind: str) -> None:
    action = next(a for t, a in SAMPLES.items() if t.__name__ == kind)
    sim = SimBackend(fabric_from_shape(2, 8, 2))
    name = sorted(sim.nodes)[0]
    if hasattr(action, "node"):
        action = type(action)(**{**action.__dict__, "node": name})
    (result,) = sim.apply([action], 0.0)
    assert not result.detail.startswith(UNHANDLED), result


class Launcher:
    def __init__(self, out: Mapping[str, str]) -> None:
        self.out, self.calls = out, list[tuple[str, ...]]()

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        self.calls.append(tuple(argv))
        if tuple(argv[:4]) == ("scontrol", "-o", "show", "reservation"):
            return 1, "", "No reservations in the system"
        return 0, self.out.get(argv[0], ""), ""


def _backend(tmp_path: Path, squeue: str) -> tuple[CliBackend, Launcher]:
    from railgang.daemon.slurm.cli.records import topology_from_show

    topo = tmp_path / "topology.conf"
    topo.write_text(topology_from_show((DATA / "scontrol_topology.txt").read_text()))
    la = Launcher({"squeue": squeue, "sinfo": (DATA / "sinfo_mixed.json").read_text(),
                   "sbatch": "4242\n"})
    return CliBackend(SlurmSettings(topology=topo, narrow_full_read_s=0), SlurmRunner(exec_fn=la, retries=0),
                      read_shares=False, failures=FailureSettings(flaky_count=2)), la


@pytest.mark.parametrize("kind", [t.__name__ for t in ALL])
def test_the_slurm_backend_applies_every_action_type(kind: str, tmp_path: Path) -> None:
    backend, _ = _backend(tmp_path, squeue_text(RUNNING))
    backend.observe(NOW)
    action = next(a for t, a in SAMPLES.items() if t.__name__ == kind)
    (result,) = backend.apply([action], NOW)
    assert not result.detail.startswith(UNHANDLED), result


def _node_failed(job_id: int) -> dict[str, Any]:
    return with_(RUNNING, job_id=job_id, job_state="NODE_FAIL", requeue=True, end_time=int(NOW) - 5)


def test_observe_only_reads_and_the_failure_step_decides(tmp_path: Path) -> None:
    """Two jobs killed by a node failure (flaky_count=2): observing runs no command that
    changes Slurm; the step asks for the requeues, the drain and the burn-in; apply runs them."""
    backend, la = _backend(tmp_path, squeue_text(_node_failed(90), _node_failed(91)))
    backend.observe(NOW)
    changing = [c for c in la.calls if c[0] in ("sbatch", "scancel")
                or (c[0] == "scontrol" and c[1] in ("requeue", "update", "create", "delete"))]
    assert changing == []
    steps = Pipeline([FailureStep(FailureSettings(flaky_count=2))])
    snap, actions, _ = steps.run(backend.snapshot(NOW), backend.facts(), NOW)
    kinds = [type(a).__name__ for a in actions]
    assert kinds[:2] == ["Requeue", "Requeue"] and "DrainNode" in kinds and "SubmitBurnIn" in kinds
    drained = {a.node for a in actions if isinstance(a, DrainNode)}
    assert all(not snap.nodes[n].state.usable and n not in snap.free for n in drained)
    la.calls.clear()
    results = backend.apply(actions, NOW)
    assert all(r.ok for r in results), results
    assert ("scontrol", "requeue", "90,91") in la.calls
    assert any(c[0] == "sbatch" for c in la.calls)
    steps.settle(results, NOW)
    memory = steps.memory["failures"]
    assert isinstance(memory, FailureMemory)
    assert {b.job_id for b in memory.memory.burn_ins.values()} == {"4242"}


def test_the_failure_step_is_pure(tmp_path: Path) -> None:
    backend, _ = _backend(tmp_path, squeue_text(_node_failed(90), _node_failed(91)))
    snap = backend.snapshot(NOW)
    step = FailureStep(FailureSettings(flaky_count=2))
    a = step.run(snap, backend.facts(), step.initial(), NOW)
    b = step.run(snap, backend.facts(), step.initial(), NOW)
    assert a.actions == b.actions and a.memory == b.memory and a.snapshot == b.snapshot
    assert step.run(snap, {}, step.initial(), NOW).actions == ()  # no facts: nothing to answer


def test_the_simulator_hands_a_burn_in_its_job_id_and_the_step_waits_on_it() -> None:
    sim = SimBackend(fabric_from_shape(2, 8, 2))
    node = sorted(sim.nodes)[0]
    step = FailureStep(FailureSettings())
    results = sim.apply([DrainNode(node, "railgang: flaky"), SubmitBurnIn(node)], 0.0)
    memory = step.settle(step.initial(), results[1:], 0.0)
    assert memory.memory.burn_ins[node].job_id == sim.burn_ins[node]
    assert not sim.nodes[node].state.usable  # reserved for its burn-in
    (done,) = sim.apply([ReleaseBurnIn(node, "burn-in passed")], 10.0)
    assert done.ok and sim.nodes[node].state.usable


def test_run_cycle_sends_the_steps_actions_first_and_settles_them() -> None:
    sim = SimBackend(fabric_from_shape(2, 8, 2))
    node = sorted(sim.nodes)[0]

    class Drain:
        name = "drain"

        def initial(self) -> list[ActionResult]:
            return []

        def run(self, snapshot: Any, facts: Any, memory: Any, now: float) -> Any:
            from railgang.daemon.pipeline import StepOut

            return StepOut(snapshot, (DrainNode(node, "railgang: test"),), memory)

        def settle(self, memory: Any, results: Sequence[ActionResult], now: float) -> Any:
            return [*memory, *results]

    steps = Pipeline([Drain()])
    outcome = run_cycle(sim, get("fifo"), SimClock(0.0), random.Random(0), steps=steps)
    assert outcome.actions[0] == DrainNode(node, "railgang: test") and "drain" in outcome.timings
    assert [r.action for r in steps.memory["drain"]] == [outcome.actions[0]]
    assert not sim.nodes[node].state.usable


def test_the_journal_payload_of_the_failure_actions_is_plain_json() -> None:
    for action in (Requeue("9", "hung"), SubmitBurnIn("n01", "flaky"), Resume("n01", "x")):
        assert isinstance(json.loads(encode(action)), dict)


def test_the_daemon_builds_its_cycle_from_the_settings_alone(tmp_path: Path) -> None:
    """``cycle_of(settings)``: the failure step (its memory kept in ``failures.memory_file``),
    the serving controller, then the core with the settings' knobs and policy."""
    from railgang.daemon.config import load_settings
    from railgang.daemon.cycle_settings import cycle_from, cycle_of

    memory = tmp_path / "failures.json"
    settings = load_settings(daemon={"policy": "fifo", "leaf_wait_s": 7.0},
                             failures={"memory_file": str(memory)})
    cycle = cycle_of(settings)
    assert [s.name for s in cycle.steps.steps] == ["failures", "serving"]
    assert cycle.config == cycle_from(settings).config and cycle.policy.name == "fifo"
    cycle.steps.run(SimBackend(fabric_from_shape(2, 8, 2)).snapshot(0.0), {}, 0.0)
    cycle.steps.settle([], 0.0)
    assert json.loads(memory.read_text())["version"] == 1
    off = cycle_of(load_settings(failures={"enabled": False}))
    assert [s.name for s in off.steps.steps] == ["serving"]
