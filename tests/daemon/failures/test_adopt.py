"""failures/adopt.py and the burn-in rule of respond.py: a restarted daemon (its memory lost)
takes over the flaky nodes Slurm still shows, settles reservations nobody holds, and never drains
a node again for kills from before its passed burn-in (found in CI: a second daemon, started
seconds after the first one's burn-in passed, counted the same three NODE_FAIL jobs squeue still
listed and drained the node again; stopped mid-burn-in, it left the reservation behind)."""

from __future__ import annotations

from railgang.daemon.failures.adopt import adopt
from railgang.daemon.failures.flaky import FlakyRules, NodeStatus, Step, StepKind
from railgang.daemon.failures.respond import JobView, Memory, NodeView, respond

RULES = FlakyRules(count=3, window_s=86400.0, retry_s=600.0)
UP = {n: NodeView(n, "idle") for n in ("n15", "n16")}
FLAKY = "railgang: flaky: 3 job failures in 24 h (last: node_fail of job 115)"


def failed(job: str, started: float, node: str = "n16") -> JobView:
    return JobView(job, "NODE_FAIL", 0, (node,), may_requeue=False, started_at=started)


def burn_in(job: str, state: str, started: float, node: str = "n16") -> JobView:
    return JobView(job, state, 0, (node,), may_requeue=False, started_at=started, burn_in_of=node)


KILLS = [failed("113", 100.0), failed("114", 110.0), failed("115", 120.0)]


def test_kills_from_before_a_passed_burn_in_do_not_drain_the_node_again() -> None:
    _, r = respond(Memory(), [*KILLS, burn_in("127", "COMPLETED", 200.0)], UP, {}, 210.0, RULES)
    assert r.faults == () and r.steps == () and r.held_out == ()
    # the same kills without the burn-in: a fresh daemon drains the node, as it should
    _, r = respond(Memory(), KILLS, UP, {}, 210.0, RULES)
    assert [(s.kind, s.node) for s in r.steps] == [(StepKind.DRAIN, "n16"), (StepKind.BURN_IN, "n16")]


def test_a_kill_after_the_burn_in_still_counts() -> None:
    seen = [*KILLS, burn_in("127", "COMPLETED", 200.0), failed("130", 250.0)]
    _, r = respond(Memory(), seen, UP, {}, 260.0, RULES)
    assert [(f.node, f.job_id) for f in r.faults] == [("n16", "130")] and r.steps == ()


def test_a_failed_burn_in_clears_nothing() -> None:
    _, r = respond(Memory(), [*KILLS, burn_in("127", "FAILED", 200.0)], UP, {}, 210.0, RULES)
    assert [s.kind for s in r.steps] == [StepKind.DRAIN, StepKind.BURN_IN]


def test_a_running_burn_in_is_awaited_and_its_pass_resumes_the_node() -> None:
    m, steps = adopt(Memory(), [burn_in("128", "RUNNING", 300.0)], UP, ["n16"], 301.0)
    assert steps == [] and m.flaky.status("n16") is NodeStatus.BURN_IN
    assert m.burn_ins["n16"].job_id == "128" and "burn-in job 128" in (m.flaky.why("n16") or "")
    _, r = respond(m, [burn_in("128", "COMPLETED", 300.0)], UP, {"128": "COMPLETED"}, 310.0,
                   RULES)
    assert [(s.kind, s.node) for s in r.steps] == [(StepKind.RESUME, "n16")]


def test_a_node_drained_as_flaky_waits_for_its_burn_in() -> None:
    nodes = {**UP, "n16": NodeView("n16", "drain", FLAKY)}
    m, steps = adopt(Memory(), [], nodes, [], 0.0)
    assert steps == [] and m.flaky.status("n16") is NodeStatus.DRAINED and m.flaky.why("n16")
    _, r = respond(m, [], nodes, {}, 1.0, RULES)
    assert [(s.kind, s.node) for s in r.steps] == [(StepKind.BURN_IN, "n16")]
    assert r.held_out == ("n16",)


def test_someone_elses_drain_is_not_adopted() -> None:
    m, _ = adopt(Memory(), [], {**UP, "n16": NodeView("n16", "drain", "lame IB link")}, [], 0.0)
    assert m.flaky.status("n16") is NodeStatus.OK


def test_a_reservation_whose_burn_in_passed_unseen_is_released() -> None:
    m, steps = adopt(Memory(), [burn_in("128", "COMPLETED", 300.0)], UP, ["n16"], 400.0)
    assert steps == [Step(StepKind.RELEASE, "n16", "burn-in job 128 passed")]
    assert m.flaky.status("n16") is NodeStatus.OK


def test_a_reservation_without_a_passed_burn_in_is_drained_and_burnt_in_again() -> None:
    for seen, how in (([], "job gone"), ([burn_in("128", "FAILED", 300.0)], "job 128 failed")):
        m, steps = adopt(Memory(), seen, UP, ["n16"], 400.0)
        assert [(s.kind, s.node) for s in steps] == [(StepKind.DRAIN, "n16")]
        assert how in steps[0].reason and steps[0].reason.startswith("railgang: flaky")
        assert m.flaky.status("n16") is NodeStatus.DRAINED


def test_what_the_memory_already_holds_is_left_alone() -> None:
    m, _ = adopt(Memory(), [burn_in("128", "RUNNING", 300.0)], UP, ["n16"], 301.0)
    again, steps = adopt(m, [burn_in("129", "RUNNING", 350.0)], UP, ["n16"], 351.0)
    assert steps == [] and again.burn_ins["n16"].job_id == "128"


def test_the_latest_burn_in_of_a_node_decides() -> None:
    seen = [burn_in("127", "FAILED", 100.0), burn_in("128", "COMPLETED", 300.0)]
    _, steps = adopt(Memory(), seen, UP, ["n16"], 400.0)
    assert [s.kind for s in steps] == [StepKind.RELEASE]
