"""failures/respond.py trusts only what it can tell apart (issue 38 rows 1; docs/security.md): a
node failure is what Slurm says failed the node (a job ended NODE_FAIL, a node down), never a
requeue by a job's owner or an admin; a drain by anyone else is theirs: railgang never counts
kills against it, never overwrites its reason, never burns it in, never resumes it."""

from __future__ import annotations

from railgang.daemon.failures.flaky import FlakyRules, NodeStatus, StepKind
from railgang.daemon.failures.respond import (
    JobView,
    Memory,
    NodeView,
    burn_in_submitted,
    drained_by_other,
    respond,
)

RULES = FlakyRules(count=3, window_s=3600.0, retry_s=600.0)
UP = {n: NodeView(n, "idle") for n in ("n03", "n04")}
MAINT = {**UP, "n04": NodeView("n04", "drain", "maint: replace PSU")}
JOBS = ("1", "2", "3")


def test_who_drained_a_node() -> None:
    assert drained_by_other(NodeView("n", "drain", "maint: replace PSU"))
    assert drained_by_other(NodeView("n", "drain", "Kill task failed"))  # Slurm's own: an admin's to end
    assert not drained_by_other(NodeView("n", "drain", "railgang: flaky: 3 job failures"))
    assert not drained_by_other(NodeView("n", "drain", ""))  # in a MAINT reservation, not drained
    assert not drained_by_other(NodeView("n", "down", "Not responding"))  # Slurm: it failed
    assert not drained_by_other(NodeView("n", "idle", "maint: done"))


def test_an_owners_requeue_on_a_node_an_admin_drained_is_no_failure() -> None:
    """Row 1: three hinted jobs pinned to n04, an admin drains it, the owner requeues them."""
    m, _ = respond(Memory(), [JobView(j, "RUNNING", 0, ("n04",), ours=True) for j in JOBS],
                   UP, {}, 0.0, RULES)
    for at in (4.0, 8.0, 12.0):
        m, r = respond(m, [JobView(j, "PENDING", 1, ours=True) for j in JOBS], MAINT, {}, at, RULES)
        assert r.faults == () and r.after_fault == frozenset() and r.steps == () and r.held_out == ()
    assert m.flaky.status("n04") is NodeStatus.OK


def test_kills_on_a_node_drained_by_someone_else_do_not_make_it_railgangs() -> None:
    """Slurm's NODE_FAIL is a failure (the job is requeued, first in its class), but the node is
    the admin's: no count, no railgang drain over their reason, no burn-in."""
    m = Memory()
    for at, j in enumerate(JOBS):
        m, r = respond(m, [JobView(j, "NODE_FAIL", 0, ("n04",), ours=True)], MAINT, {}, float(at), RULES)
        assert r.requeue == (j,) and r.after_fault == {j} and r.steps == () and r.held_out == ()
    assert m.flaky.status("n04") is NodeStatus.OK


def flaky_n04() -> Memory:
    m = Memory()
    for at, j in enumerate(JOBS):
        m, r = respond(m, [JobView(j, "NODE_FAIL", 0, ("n04",), may_requeue=False)], UP, {},
                       float(at), RULES)
    assert [s.kind for s in r.steps] == [StepKind.DRAIN, StepKind.BURN_IN]
    return m


def test_a_flaky_node_an_admin_drains_meanwhile_waits_for_them() -> None:
    m = flaky_n04()
    _, r = respond(m, [], MAINT, {}, 10.0, RULES)
    assert r.steps == () and r.held_out == ("n04",)  # no burn-in: that would resume it
    _, r = respond(m, [], UP, {}, 11.0, RULES)  # the admin resumed it: railgang's verdict stands
    assert [s.kind for s in r.steps] == [StepKind.BURN_IN]


def test_a_burn_in_that_fails_under_an_admins_drain_keeps_their_reason() -> None:
    """The failed burn-in's drain would overwrite the admin's reason: only its reservation goes."""
    m = burn_in_submitted(flaky_n04(), "n04", "100", 5.0)
    m, r = respond(m, [], MAINT, {"100": "FAILED"}, 50.0, RULES)
    assert [(s.kind, s.node) for s in r.steps] == [(StepKind.RELEASE, "n04")]
    assert "maint: replace PSU" in r.steps[0].reason and r.held_out == ("n04",)
    _, r = respond(m, [], MAINT, {}, 50.0 + RULES.retry_s, RULES)
    assert r.steps == ()


def test_a_restarted_daemon_leaves_an_admins_drain_over_its_unfinished_burn_in() -> None:
    from railgang.daemon.failures.adopt import adopt

    m, steps = adopt(Memory(), [], MAINT, ["n04"], 600.0)
    assert [(s.kind, s.node) for s in steps] == [(StepKind.RELEASE, "n04")]
    assert "maint: replace PSU" in steps[0].reason
    _, r = respond(m, [], MAINT, {}, 601.0, RULES)
    assert r.steps == () and r.held_out == ("n04",)  # waits for them, then burns it in
