"""slurm/cli/failures.py: the commands the Slurm backend runs for each of the failure step's
actions (failures/step.py), against a scripted launcher (the real effects:
tests/e2e/test_failures_e2e.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import pytest

from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.failures.config import FailureSettings
from railgang.daemon.slurm.cli.failures import hide
from railgang.daemon.slurm.cli.records import SinfoNode, SqueueJob
from railgang.daemon.slurm.cli.runner import SlurmRunner
from tests.daemon.failures.harness import Responder


class Launcher:
    """Records every command but the reservation listing of the first cycle (``listings``
    counts those; ``reservations`` is what it prints)."""

    def __init__(self, sbatch_out: str = "4242\n", fail: Mapping[str, str] | None = None,
                 reservations: str = "No reservations in the system\n") -> None:
        self.calls: list[tuple[str, ...]] = []
        self.sbatch_out, self.fail, self.reservations = sbatch_out, dict(fail or {}), reservations
        self.listings = 0

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        if tuple(argv) == ("scontrol", "-o", "show", "reservation"):
            self.listings += 1
            if "scontrol -o" in self.fail:
                return 1, "", self.fail["scontrol -o"]
            return 0, self.reservations, ""
        self.calls.append(tuple(argv))
        key = " ".join(argv[:2])
        if key in self.fail:
            return 1, "", self.fail[key]
        out = {"sbatch": self.sbatch_out, "sacctmgr": "team-a\n"}.get(argv[0], "")
        return 0, out, ""


def job(job_id: str, state: str, nodes: tuple[str, ...] = ("n03",), requeue: bool = False) -> SqueueJob:
    return SqueueJob(job_id=job_id, state=state, reason="None", account="a", user="u", name="j",
                     submit_time=0.0, eligible_time=0.0, start_time=0.0, resize_time=0.0,
                     time_limit_s=None, priority=1, restarts=0, nodes_requested=len(nodes),
                     gpus_requested=8, batch_host=nodes[0], required_nodes=(),
                     allocation=tuple((n, tuple(range(8))) for n in nodes), admin_comment="",
                     tag=None, requeue=requeue)


NODES = [SinfoNode(f"n0{i}", 8, NodeState.IDLE, "", frozenset()) for i in (1, 2, 3)]


def responder(launcher: Launcher, **kw: object) -> Responder:
    settings = FailureSettings(flaky_count=2, **kw)  # type: ignore[arg-type]
    return Responder(SlurmRunner(exec_fn=launcher, retries=0), settings, user="railgang")


def test_a_flaky_node_is_drained_then_burnt_in_inside_a_reservation_then_returned() -> None:
    la = Launcher()
    r = responder(la)
    r.step([job("1", "NODE_FAIL")], NODES, 0.0)
    assert la.calls == []
    _, done = r.step([job("1", "NODE_FAIL"), job("2", "NODE_FAIL")], NODES, 1.0)
    kinds = [c[:2] for c in la.calls]
    assert kinds == [("scontrol", "update"), ("scontrol", "delete"), ("scontrol", "delete"),
                     ("scontrol", "create"), ("sacctmgr", "-n"), ("sbatch", "--parsable"),
                     ("scontrol", "update")]
    drain, create, sbatch, resume = la.calls[0], la.calls[3], la.calls[5], la.calls[6]
    assert drain[2:4] == ("nodename=n03", "State=DRAIN") and drain[4].startswith("Reason=railgang: flaky: 2 job")
    assert "Users=railgang" in create and "Nodes=n03" in create and "Flags=MAINT,IGNORE_JOBS" in create
    assert "--nodelist=n03" in sbatch and "--reservation=railgang_burnin_n03" in sbatch
    assert "--account=team-a" in sbatch  # the daemon user's default: job_submit.lua wants one
    assert sbatch[-1].endswith("slurm_plugins/burnin.sh")
    assert resume == ("scontrol", "update", "nodename=n03", "State=RESUME")
    assert [f.step for f in done] == ["drain", "release", "burn_in"] and all(f.ok for f in done)
    assert r.held_out() == {"n03"} and "burn-in running" in (r.why("n03") or "")
    la.calls.clear()
    burn = job("4242", "COMPLETED", ("n03",))
    _, done = r.step([burn], NODES, 30.0)
    assert la.calls == [("scontrol", "delete", "ReservationName=railgang_burnin_n03")]
    assert [f.step for f in done] == ["release"] and r.held_out() == frozenset()
    assert "back in service" in done[0].detail


def test_a_configured_burn_in_command_is_wrapped() -> None:
    la = Launcher()
    r = responder(la, burn_in_command="dcgmi diag -r 2", burn_in_account="ops")
    r.step([job("1", "NODE_FAIL"), job("2", "NODE_FAIL")], NODES, 1.0)
    sbatch = next(c for c in la.calls if c[0] == "sbatch")
    assert sbatch[-1] == "--wrap=dcgmi diag -r 2" and "--account=ops" in sbatch


def test_a_refused_sbatch_leaves_the_node_drained_and_removes_the_reservation() -> None:
    la = Launcher(fail={"sbatch --parsable": "sbatch: error: Invalid account"})
    r = responder(la)
    _, done = r.step([job("1", "NODE_FAIL"), job("2", "NODE_FAIL")], NODES, 1.0)
    assert not done[-1].ok and "Invalid account" in done[-1].detail
    assert ("scontrol", "update", "nodename=n03", "State=RESUME") not in la.calls
    assert la.calls[-1] == ("scontrol", "delete", "ReservationName=railgang_burnin_n03")
    la.calls.clear()
    r.step([], NODES, 2.0)
    assert la.calls == []  # not again every cycle: after burn_in_retry_s
    assert "1 failed" in (r.why("n03") or "")


def test_an_ended_job_without_its_allocation_is_blamed_on_its_node_list() -> None:
    import dataclasses

    la = Launcher()
    r = responder(la)
    ended = dataclasses.replace(job("1", "NODE_FAIL"), allocation=(), node_list=("n02",))
    resp, _ = r.step([ended], NODES, 0.0)
    assert [f.node for f in resp.faults] == ["n02"]


def test_node_fail_jobs_slurm_left_ended_are_requeued() -> None:
    la = Launcher()
    r = responder(la)
    _, done = r.step([job("5", "NODE_FAIL", requeue=True)], NODES, 0.0)
    assert la.calls == [("scontrol", "requeue", "5")] and done[0].step == "requeue"


def test_held_out_nodes_look_drained_to_the_core() -> None:
    shown = hide(NODES, frozenset({"n02"}))
    assert [n.state for n in shown] == [NodeState.IDLE, NodeState.DRAIN, NodeState.IDLE]


def test_a_node_name_scontrol_could_misread_is_refused() -> None:
    la = Launcher()
    r = responder(la)
    odd = [SinfoNode("n1 State=RESUME", 8, NodeState.IDLE, "", frozenset())]
    _, done = r.step([job("1", "NODE_FAIL", ("n1 State=RESUME",)),
                      job("2", "NODE_FAIL", ("n1 State=RESUME",))], odd, 1.0)
    assert la.calls == [] and done and not any(f.ok for f in done)


RESERVED = ("ReservationName=railgang_burnin_n03 StartTime=2026-12-02T00:02:35 "
            "EndTime=2027-12-02T00:02:35 Duration=365-00:00:00 Nodes=n03 NodeCnt=1 CoreCnt=16 "
            "Features=(null) PartitionName=gpu Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=16 "
            "Users=railgang Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE "
            "BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)\n"
            "ReservationName=ops_window StartTime=2026-12-03T00:00:00 Nodes=n01 Users=root\n")


def named(job_id: str, state: str, user: str, node: str = "n03") -> SqueueJob:
    import dataclasses

    return dataclasses.replace(job(job_id, state, (node,)), name=f"railgang-burnin-{node}",
                               user=user, start_time=500.0)


def test_a_restarted_daemon_releases_the_reservation_of_a_burn_in_that_passed_unseen() -> None:
    la = Launcher(reservations=RESERVED)
    r = responder(la)
    _, done = r.step([named("4242", "COMPLETED", "railgang")], NODES, 600.0)
    assert la.calls == [("scontrol", "delete", "ReservationName=railgang_burnin_n03")]
    assert [(f.job_id, f.step, f.ok) for f in done] == [("n03", "release", True)]
    assert "burn-in job 4242 passed" in done[0].detail
    r.step([named("4242", "COMPLETED", "railgang")], NODES, 601.0)
    assert la.listings == 1  # once per daemon start


def test_a_restarted_daemon_burns_in_again_a_node_whose_burn_in_nobody_saw_pass() -> None:
    la = Launcher(reservations=RESERVED)
    r = responder(la)
    _, done = r.step([], NODES, 600.0)
    assert [f.step for f in done] == ["drain", "release", "burn_in"] and all(f.ok for f in done)
    assert "unfinished at a daemon restart (job gone)" in la.calls[0][4]
    assert r.held_out() == {"n03"}


def test_a_users_job_named_like_a_burn_in_is_not_one() -> None:
    la = Launcher()
    r = responder(la)
    resp, done = r.step([named("66", "RUNNING", "mallory")], NODES, 600.0)
    assert la.calls == [] and done == [] and r.held_out() == frozenset()
    # nor does a COMPLETED one clear the node of earlier kills
    kills = [job("1", "NODE_FAIL"), job("2", "NODE_FAIL")]
    resp, _ = r.step([*kills, named("67", "COMPLETED", "mallory")], NODES, 601.0)
    assert [s.kind.value for s in resp.steps] == ["drain", "burn_in"]


def test_an_unanswered_reservation_listing_is_asked_again() -> None:
    la = Launcher(fail={"scontrol -o": "slurm_load_reservations error: Unable to contact slurm controller"})
    r = responder(la)
    r.step([], NODES, 0.0)
    r.step([], NODES, 1.0)
    assert la.listings == 2 and la.calls == []


def test_roots_burn_in_counts_too() -> None:
    la = Launcher(reservations=RESERVED)
    r = responder(la)
    _, done = r.step([named("4242", "COMPLETED", "root")], NODES, 600.0)
    assert [(f.step, f.ok) for f in done] == [("release", True)]


# issue 38 row 5: an operator's reservation named like a burn-in one (Users=root, Flags=MAINT)
OPERATORS = ("ReservationName=railgang_burnin_n02 StartTime=2026-12-03T00:00:00 "
             "EndTime=2026-12-03T01:00:00 Duration=01:00:00 Nodes=n02 NodeCnt=1 CoreCnt=16 "
             "Features=(null) PartitionName=gpu Flags=MAINT,SPEC_NODES TRES=cpu=16 Users=root "
             "Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE\n")


def test_only_the_reservations_railgang_made_are_its_own() -> None:
    from railgang.daemon.slurm.cli.failures import burn_in_reservations

    mine = RESERVED.splitlines()[0]
    assert burn_in_reservations(RESERVED + OPERATORS, "railgang") == (["n03"], ["railgang_burnin_n02"])
    for other in (mine.replace("Users=railgang", "Users=root"),
                  mine.replace("Users=railgang", "Users=railgang,mallory"),
                  mine.replace("Flags=MAINT,IGNORE_JOBS,SPEC_NODES", "Flags=MAINT,SPEC_NODES"),
                  mine.replace("Flags=MAINT,IGNORE_JOBS,SPEC_NODES", "Flags=MAINT,IGNORE_JOBS,DAILY"),
                  mine.replace("Nodes=n03", "Nodes=n[03-04]"),
                  mine.replace("railgang_burnin_n03", "railgang_burnin_n03;x")):
        assert burn_in_reservations(other, "railgang")[0] == [], other
    # a daemon run as root made its own for root
    assert burn_in_reservations(mine.replace("Users=railgang", "Users=root"), "root")[0] == ["n03"]


def test_a_restarted_daemon_leaves_an_operators_reservation_alone(
        caplog: pytest.LogCaptureFixture) -> None:
    la = Launcher(reservations=OPERATORS)
    r = responder(la)
    with caplog.at_level(logging.WARNING):
        _, done = r.step([], NODES, 600.0)
        r.step([], NODES, 601.0)
    assert la.calls == [] and done == [] and r.held_out() == frozenset()
    warned = [m for m in caplog.messages if "railgang_burnin_n02" in m]
    assert len(warned) == 1 and "left alone" in warned[0], caplog.messages
    # nor is it deleted (or replaced) when n02 does turn out flaky: no burn-in until it is gone
    _, done = r.step([job("1", "NODE_FAIL", ("n02",)), job("2", "NODE_FAIL", ("n02",))], NODES, 602.0)
    assert la.calls == [("scontrol", "update", "nodename=n02", "State=DRAIN",
                         la.calls[0][4])] and la.calls[0][4].startswith("Reason=railgang: flaky")
    assert [(f.step, f.ok) for f in done] == [("drain", True), ("release", True), ("burn_in", False)]


def test_a_waiting_burn_in_does_not_resume_a_node_an_admin_drained_meanwhile() -> None:
    la = Launcher()
    r = responder(la)
    r.step([job("1", "NODE_FAIL"), job("2", "NODE_FAIL")], NODES, 1.0)
    la.calls.clear()
    drained = [*NODES[:2], SinfoNode("n03", 8, NodeState.DRAIN, "railgang: flaky: 2 job failures", frozenset())]
    r.step([job("4242", "PENDING")], drained, 2.0)
    assert la.calls == [("scontrol", "update", "nodename=n03", "State=RESUME")]  # refused before: again
    la.calls.clear()
    maint = [*NODES[:2], SinfoNode("n03", 8, NodeState.DRAIN, "maint: replace PSU", frozenset())]
    r.step([job("4242", "PENDING")], maint, 3.0)
    assert la.calls == []
