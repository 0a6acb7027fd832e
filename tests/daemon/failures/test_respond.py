"""failures/respond.py: which kills are failures, requeue and first-in-class, flaky nodes to
burn-in and back (issue 20 item 2)."""

from __future__ import annotations

import pytest

from railgang.daemon.failures.flaky import FlakyRules, NodeStatus, StepKind
from railgang.daemon.failures.respond import (
    JobView,
    Memory,
    NodeView,
    burn_in_submitted,
    respond,
)

RULES = FlakyRules(count=3, window_s=3600.0, retry_s=600.0)
UP = {n: NodeView(n, "idle") for n in ("a", "b", "c")}


def nodes(**states: str) -> dict[str, NodeView]:
    return {**UP, **{n: NodeView(n, s, "Not responding" if s == "down" else "") for n, s in states.items()}}


def run(job: str, restarts: int = 0, on: tuple[str, ...] = ("a", "b"), ours: bool = True) -> JobView:
    return JobView(job, "RUNNING", restarts, on, ours=ours)


def test_a_gang_slurm_requeued_after_its_node_died_goes_first_in_class() -> None:
    m, _ = respond(Memory(), [run("7")], UP, {}, 0.0, RULES)
    m, r = respond(m, [JobView("7", "PENDING", 1, ours=True)], nodes(a="down"), {}, 10.0, RULES)
    assert r.after_fault == {"7"} and r.requeue == ()
    assert [(f.node, f.job_id) for f in r.faults] == [("a", "7")]  # only the dead node is blamed
    # still waiting: still first; running again: no longer
    m, r = respond(m, [JobView("7", "PENDING", 1, ours=True)], nodes(a="down"), {}, 11.0, RULES)
    assert r.after_fault == {"7"} and r.faults == ()
    m, r = respond(m, [run("7", 1, ("b", "c"))], nodes(a="down"), {}, 12.0, RULES)
    assert r.after_fault == frozenset()


@pytest.mark.parametrize(("job", "why"), [
    (JobView("7", "PENDING", 1, railgang_requeue=True, ours=True), "railgang's own preemption"),
    (JobView("7", "PENDING", 0, ours=True), "not requeued (restart count unchanged)"),
], ids=["railgang-requeue", "same-restart"])
def test_requeues_that_are_not_failures(job: JobView, why: str) -> None:
    m, _ = respond(Memory(), [run("7")], UP, {}, 0.0, RULES)
    _, r = respond(m, [job], nodes(a="down"), {}, 10.0, RULES)
    assert r.after_fault == frozenset() and r.faults == (), why


def test_a_requeue_with_every_node_healthy_is_not_a_failure() -> None:
    m, _ = respond(Memory(), [run("7")], UP, {}, 0.0, RULES)
    _, r = respond(m, [JobView("7", "PENDING", 1, ours=True)], UP, {}, 10.0, RULES)
    assert r.after_fault == frozenset()  # an admin's `scontrol requeue`


def test_node_fail_without_slurms_requeue_is_requeued_once_unless_the_user_said_no() -> None:
    ended = JobView("8", "NODE_FAIL", 0, ("c",), ours=True)
    m, r = respond(Memory(), [ended], UP, {}, 0.0, RULES)
    assert r.requeue == ("8",) and r.after_fault == {"8"}
    _, r = respond(m, [ended], UP, {}, 1.0, RULES)  # squeue shows it for MinJobAge: not twice
    assert r.requeue == () and r.faults == ()
    _, r = respond(Memory(), [JobView("9", "NODE_FAIL", 0, ("c",), may_requeue=False)], UP, {}, 0.0, RULES)
    assert r.requeue == () and [f.node for f in r.faults] == ["c"]


def fail_on(m: Memory, node: str, job: str, at: float) -> tuple[Memory, list[StepKind]]:
    m, r = respond(m, [JobView(job, "NODE_FAIL", 0, (node,), may_requeue=False)], UP, {}, at, RULES)
    return m, [s.kind for s in r.steps]


def test_three_kills_drain_a_node_then_burn_in_then_resume() -> None:
    m = Memory()
    m, steps = fail_on(m, "c", "1", 0.0)
    m, steps = fail_on(m, "c", "2", 10.0)
    assert steps == [] and m.flaky.status("c") is NodeStatus.OK
    m, steps = fail_on(m, "c", "3", 20.0)
    assert steps == [StepKind.DRAIN, StepKind.BURN_IN]
    assert m.flaky.why("c", ).startswith("railgang: flaky: 3 job failures")  # type: ignore[union-attr]
    m = burn_in_submitted(m, "c", "100", 21.0)
    _, r = respond(m, [], UP, {"100": "RUNNING"}, 22.0, RULES)
    assert r.steps == () and r.held_out == ("c",)
    _, r = respond(m, [], UP, {"100": "COMPLETED"}, 30.0, RULES)
    assert [s.kind for s in r.steps] == [StepKind.RESUME] and r.held_out == ()


@pytest.mark.parametrize("state", ["FAILED", "TIMEOUT", None], ids=["failed", "timeout", "gone"])
def test_a_failed_burn_in_drains_again_and_retries_later(state: str | None) -> None:
    m = Memory()
    for i in range(3):
        m, _ = fail_on(m, "c", str(i), float(i))
    m = burn_in_submitted(m, "c", "100", 5.0)
    m, r = respond(m, [], UP, {} if state is None else {"100": state}, 50.0, RULES)
    assert [s.kind for s in r.steps] == [StepKind.DRAIN] and "burn-in failed" in r.steps[0].reason
    assert r.held_out == ("c",)
    _, r = respond(m, [], UP, {}, 100.0, RULES)
    assert r.steps == ()  # retry_s not yet over
    _, r = respond(m, [], UP, {}, 50.0 + RULES.retry_s, RULES)
    assert [s.kind for s in r.steps] == [StepKind.BURN_IN]


def test_no_burn_in_while_a_job_still_runs_on_the_node() -> None:
    m = Memory()
    for i in range(2):
        m, _ = fail_on(m, "c", str(i), float(i))
    busy = {**UP, "c": NodeView("c", "drain", "railgang: flaky", busy=True)}
    _, r = respond(m, [JobView("3", "NODE_FAIL", 0, ("c",), may_requeue=False)], busy, {}, 3.0, RULES)
    assert [s.kind for s in r.steps] == [StepKind.DRAIN]


def test_kills_outside_the_window_do_not_add_up() -> None:
    m = Memory()
    for i, at in enumerate((0.0, 4000.0, 8000.0)):
        m, steps = fail_on(m, "c", str(i), at)
        assert steps == []


def test_a_nan_clock_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        respond(Memory(), [], UP, {}, float("nan"), RULES)


@pytest.mark.parametrize(("between", "count"), [("COMPLETING", 1), ("COMPLETING", 0), ("PENDING", 0)],
                         ids=["completing-bumped", "completing", "waiting-same-count"])
def test_a_requeue_seen_in_two_steps_is_still_a_failure(between: str, count: int) -> None:
    """Slurm 22.05 shows a gang whose slurmd died COMPLETING with the restart count already
    bumped for a cycle or more before it waits (seen on the dev cluster): the run is kept."""
    m, _ = respond(Memory(), [run("7")], UP, {}, 0.0, RULES)
    m, r = respond(m, [JobView("7", between, count, ours=True)], nodes(a="down"), {}, 5.0, RULES)
    assert r.faults == ()
    m, r = respond(m, [JobView("7", "PENDING", 1, ours=True)], nodes(a="down"), {}, 10.0, RULES)
    assert r.after_fault == {"7"} and [f.node for f in r.faults] == ["a"]
