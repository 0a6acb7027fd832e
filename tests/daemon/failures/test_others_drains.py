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
    Setters,
    burn_in_submitted,
    drained_by_other,
    respond,
    whose,
)

RULES = FlakyRules(count=3, window_s=3600.0, retry_s=600.0)
UP = {n: NodeView(n, "idle") for n in ("n03", "n04")}
MAINT = {**UP, "n04": NodeView("n04", "drain", "maint: replace PSU")}
JOBS = ("1", "2", "3")


def test_who_drained_a_node() -> None:
    assert drained_by_other(NodeView("n", "drain", "maint: replace PSU"))
    # Slurm's own drain is Slurm saying the node failed (set by SlurmUser): not someone else's
    assert not drained_by_other(NodeView("n", "drain", "Kill task failed", reason_by="slurm"))
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


# who set the reason (sinfo's reason_set_by_user), issue 38 row 1's second half
SLURM_IS_SLURM = Setters(slurm_user="slurm", daemon_user="railgang")
SLURM_IS_ROOT = Setters(slurm_user="root", daemon_user="railgang")  # the dev cluster's slurm.conf


def test_whose_reason_it_is() -> None:
    s = SLURM_IS_SLURM
    assert whose(NodeView("n", "down", "Not responding", reason_by="slurm"), s) == "slurm"
    assert whose(NodeView("n", "drain", "Kill task failed", reason_by="slurm"), s) == "slurm"
    assert whose(NodeView("n", "drain", "low PCIe bandwidth", reason_by="slurm"), s) == "slurm"
    assert whose(NodeView("n", "drain", "railgang: flaky", reason_by="railgang"), s) == "railgang"
    assert whose(NodeView("n", "down", "maint: replace PSU", reason_by="root"), s) == "other"
    assert whose(NodeView("n", "drain", "Kill task failed", reason_by="alice"), s) == "other"
    # someone else writing railgang's prefix does not make the node railgang's to resume
    assert whose(NodeView("n", "drain", "railgang: flaky", reason_by="alice"), s) == "other"
    r = SLURM_IS_ROOT  # root is Slurm and every admin: only Slurm's own words are Slurm's
    assert whose(NodeView("n", "down", "Not responding", reason_by="root"), r) == "slurm"
    assert whose(NodeView("n", "drain", "Kill task failed", reason_by="root"), r) == "slurm"
    assert whose(NodeView("n", "drain", "maint: replace PSU", reason_by="root"), r) == "other"
    # a read that does not say who (26.05's v0.0.45 sinfo): the words alone
    assert whose(NodeView("n", "drain", "Kill task failed"), s) == "slurm"
    assert whose(NodeView("n", "drain", "maint"), s) == "other"
    assert whose(NodeView("n", "down", ""), s) == ""


ADMIN_DOWN = {**UP, "n04": NodeView("n04", "down", "maint: replace PSU", reason_by="root")}


def test_a_node_an_admin_drained_that_then_goes_down_stays_theirs() -> None:
    """Slurm keeps the admin's reason when the drained node stops responding: its kills are not
    counted, railgang never drains over their reason (flaky_count 3 kills would)."""
    for setters in (SLURM_IS_SLURM, SLURM_IS_ROOT):
        m = Memory()
        for at, j in enumerate(JOBS):
            m, r = respond(m, [JobView(j, "NODE_FAIL", 0, ("n04",), ours=True)], ADMIN_DOWN, {},
                           float(at), RULES, setters=setters)
            assert r.requeue == (j,) and r.steps == () and r.held_out == ()
        assert m.flaky.status("n04") is NodeStatus.OK
        assert drained_by_other(ADMIN_DOWN["n04"], setters)


def test_a_requeue_on_a_node_an_admin_set_down_is_no_failure() -> None:
    """``scontrol update state=down reason=...`` by an admin requeues the node's jobs: theirs."""
    m, _ = respond(Memory(), [JobView(j, "RUNNING", 0, ("n04",), ours=True) for j in JOBS],
                   UP, {}, 0.0, RULES, setters=SLURM_IS_ROOT)
    m, r = respond(m, [JobView(j, "PENDING", 1, ours=True) for j in JOBS], ADMIN_DOWN, {}, 4.0,
                   RULES, setters=SLURM_IS_ROOT)
    assert r.faults == () and r.after_fault == frozenset() and r.steps == ()


def test_slurms_own_kill_task_failed_drain_is_a_node_failure() -> None:
    """Slurm drains a node whose job would not die ("Kill task failed", set by SlurmUser):
    the jobs it requeues count against it, and at three railgang drains and burns it in."""
    for setters, by in ((SLURM_IS_SLURM, "slurm"), (SLURM_IS_ROOT, "root")):
        nodes = {**UP, "n04": NodeView("n04", "drain", "Kill task failed", reason_by=by)}
        m = Memory()
        for at, j in enumerate(JOBS):
            m, _ = respond(m, [JobView(j, "RUNNING", 0, ("n03", "n04"), ours=True)], UP, {},
                           2.0 * at, RULES, setters=setters)
            m, r = respond(m, [JobView(j, "PENDING", 1, ours=True)], nodes, {}, 2.0 * at + 1,
                           RULES, setters=setters)
            assert [f.node for f in r.faults] == ["n04"] and r.after_fault >= {j}
        assert [s.kind for s in r.steps] == [StepKind.DRAIN, StepKind.BURN_IN]
        assert r.held_out == ("n04",)
