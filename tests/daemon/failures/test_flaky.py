"""Flaky nodes: three job failures in the window drain a node with a railgang: reason; it comes
back only after a burn-in passes; a failed burn-in keeps it out and is retried later."""

from __future__ import annotations

import math

import pytest

from railgang.daemon.failures.detect import Fault, FaultKind
from railgang.daemon.failures.flaky import (
    FlakyRules,
    FlakyState,
    NodeStatus,
    StepKind,
    burn_in_done,
    burn_in_started,
    observe,
)

RULES = FlakyRules(count=3, window_s=3600.0, retry_s=600.0)


def _fail(node: str, job: str | None = "j") -> Fault:
    return Fault(FaultKind.NODE_FAIL, node, job)


def test_three_failures_in_the_window_drain_then_burn_in_then_resume() -> None:
    state = FlakyState()
    for i, t in enumerate((0.0, 1000.0)):
        state, steps = observe(state, [(t, _fail("n1", f"j{i}"))], t, RULES)
        assert steps == [] and state.status("n1") is NodeStatus.OK
    state, steps = observe(state, [(2000.0, _fail("n1", "j2"))], 2000.0, RULES)
    assert [s.kind for s in steps] == [StepKind.DRAIN, StepKind.BURN_IN]
    assert steps[0].reason.startswith("railgang: flaky: 3 job failures in 1 h")
    assert state.status("n1") is NodeStatus.DRAINED and state.held_out() == ("n1",)
    state = burn_in_started(state, "n1", 2100.0)
    assert "burn-in running" in (state.why("n1") or "")
    state, steps = observe(state, [(2200.0, _fail("n1"))], 2200.0, RULES)  # held out: not counted
    assert steps == []
    state, steps = burn_in_done(state, "n1", True, 2500.0, RULES)
    assert [s.kind for s in steps] == [StepKind.RESUME]
    assert state.status("n1") is NodeStatus.OK and state.why("n1") is None
    state, steps = observe(state, [(2600.0, _fail("n1"))], 2600.0, RULES)  # history forgotten
    assert steps == []


def test_failures_outside_the_window_do_not_count() -> None:
    state = FlakyState()
    for t in (0.0, 2000.0, 4000.0, 6000.0):
        state, steps = observe(state, [(t, _fail("n1"))], t, RULES)
        assert steps == []


def test_failed_burn_in_keeps_the_node_out_and_retries_later() -> None:
    state, _ = observe(FlakyState(), [(t, _fail("n1")) for t in (0.0, 1.0, 2.0)], 2.0, RULES)
    state = burn_in_started(state, "n1", 10.0)
    state, steps = burn_in_done(state, "n1", False, 100.0, RULES)
    assert steps == [] and state.status("n1") is NodeStatus.DRAINED
    assert "1 failed" in (state.why("n1") or "")
    state, steps = observe(state, [], 200.0, RULES)
    assert steps == []  # not before retry_s
    state, steps = observe(state, [], 700.0, RULES)
    assert [s.kind for s in steps] == [StepKind.BURN_IN]


def test_faults_without_a_job_or_node_or_time_do_not_count() -> None:
    faults = [(0.0, _fail("n1", None)), (1.0, Fault(FaultKind.HANG, None, "j")),
              (math.nan, _fail("n1")), (2.0, _fail("n1")), (3.0, _fail("n1"))]
    state, steps = observe(FlakyState(), faults, 3.0, RULES)
    assert steps == [] and state.status("n1") is NodeStatus.OK


@pytest.mark.parametrize("kw", [{"count": 0}, {"window_s": 0}, {"window_s": math.nan},
                                {"retry_s": math.inf}])
def test_bad_rules(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        FlakyRules(**kw)  # type: ignore[arg-type]
