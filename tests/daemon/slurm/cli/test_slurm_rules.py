"""Slurm's own rules in the CLI backend (issue 35; slurm/cli/rules.py, docs/slurm-backend.md
"Slurm's own rules"): partitions, --exclude and plain --constraint features narrow where the
core may place a job; --nodelist, --reservation, a constraint railgang does not model and a
heterogeneous job are left to Slurm (lease released once); an unmet --dependency keeps a job out
of the queue, leased. Whole cycles run against the captured 22.05 JSON (tests/daemon/slurm/cli/
test_start_backoff.py's scripted Slurm); the real cluster's run is tests/e2e/test_slurm_rules_e2e.py.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from railgang.daemon.clock import SimClock
from railgang.daemon.core.model.actions import Start
from railgang.daemon.core.policies import registry
from railgang.daemon.loop import run_cycle
from railgang.daemon.service.explain import held_back_rows
from railgang.daemon.slurm.cli.narrow import (
    CARRIED,
    NarrowProblem,
    excluded_argv,
    new_mark,
    parse_comments,
    with_excluded,
)
from railgang.daemon.slurm.cli.records import SinfoNode, parse_sinfo, parse_squeue, squeue_job
from railgang.daemon.slurm.cli.rules import Places, left_to_slurm, plain_features, waits_on
from railgang.daemon.slurm.cli.snapshot import exclude_reads, refused_pin
from tests.daemon.slurm.cli.capture import DATA, NOW
from tests.daemon.slurm.cli.test_start_backoff import PENDING, FakeSlurm, backend, cycles, starts

NODES = {n.name: n for n in parse_sinfo((DATA / "sinfo_mixed.json").read_text())[0]}


def job(job_id: int, **fields: Any) -> dict[str, Any]:
    """A leased one-node, one-GPU railgang job of the capture, with ``fields``."""
    return {**PENDING, "job_id": job_id, "admin_comment": "railgang:tp=1,pp=1,dp=1;class=3",
            "node_count": 1, "tres_per_node": "gres:gpu:1", **fields}


def rec(**fields: Any):  # type: ignore[no-untyped-def]
    return squeue_job(job(70, **fields))


@pytest.mark.parametrize(("constraint", "features"), [
    ("ib", {"ib"}), ("ib&nvlink", {"ib", "nvlink"}), ("ib,nvlink", {"ib", "nvlink"}),
    ("a|b", None), ("[a|b]", None), ("a*2", None), ("(a&b)|c", None), ("a&&b", None), ("", None),
])
def test_plain_features_are_names_joined_by_and(constraint: str, features: set[str] | None) -> None:
    assert plain_features(constraint) == (frozenset(features) if features is not None else None)


def test_where_a_job_may_run_by_partition_exclude_and_features() -> None:
    nodes = [SinfoNode("a1", 8, NODES["n01"].state, "", frozenset({"ib"}), partitions=frozenset({"gpu"})),
             SinfoNode("a2", 8, NODES["n01"].state, "", frozenset({"ib", "nvlink"}),
                       partitions=frozenset({"gpu", "big"})),
             SinfoNode("a3", 8, NODES["n01"].state, "", frozenset(), partitions=frozenset({"big"}))]
    places = Places(nodes)
    assert places.of(rec(partition="gpu,big")) == (None, "")  # anywhere: no restriction
    assert places.of(rec(partition="gpu")) == (frozenset({"a1", "a2"}), "of partition gpu")
    assert places.of(rec(partition="big", excluded_nodes="a[2-3]")) == (
        frozenset(), "of partition big outside its --exclude list")
    assert places.of(rec(partition="gpu,big", features="nvlink&ib")) == (
        frozenset({"a2"}), "with features ib&nvlink")
    # a constraint railgang does not model narrows nothing here: the job is left to Slurm
    assert places.of(rec(partition="gpu,big", features="ib|nvlink")) == (None, "")


@pytest.mark.parametrize(("fields", "says"), [
    ({"required_nodes": "n05"}, "it asks for nodes n05 (--nodelist)"),
    ({"resv_name": "maint"}, "it asks for reservation maint (--reservation)"),
    ({"features": "ib|roce"}, "its --constraint 'ib|roce' uses more than plain features"),
    ({"het_job_id": 70}, "a heterogeneous job"),
    ({}, ""), ({"features": "ib&nvlink"}, ""), ({"excluded_nodes": "n01"}, ""),
])
def test_what_railgang_does_not_model_is_left_to_slurm(fields: dict[str, Any], says: str) -> None:
    why = left_to_slurm(rec(**fields))
    assert why.startswith(says) and bool(why) == bool(says)


def test_a_pin_railgang_set_is_not_a_users_nodelist() -> None:
    assert left_to_slurm(rec(required_nodes="n05"), frozenset({"70"})) == ""
    assert left_to_slurm(rec(required_nodes="n05", restart_cnt=1)) == ""  # requeued: ours
    assert left_to_slurm(rec(required_nodes="n05"), None) == ""  # not known: taken as ours


def test_an_unmet_dependency_waits() -> None:
    assert waits_on(rec(dependency="afterok:1(unfulfilled)")) == (
        "it waits on its dependency afterok:1(unfulfilled) (--dependency)")
    assert waits_on(rec()) == "" and waits_on(rec(dependency="(null)")) == ""


def test_a_node_in_two_partitions_is_in_both_on_24_11() -> None:
    doc = json.loads((DATA / "sinfo_24.11.json").read_text())
    first = doc["sinfo"][0]
    other = json.loads(json.dumps(first))
    other["partition"]["name"] = "big"
    doc["sinfo"].append(other)
    nodes, _ = parse_sinfo(json.dumps(doc))
    assert {n.name: n.partitions for n in nodes}[first["nodes"]["nodes"][0]] == {"gpu", "big"}
    assert len(nodes) == len({n.name for n in nodes})


def test_the_records_read_every_rule_from_the_json() -> None:
    r = rec(partition="gpu,big", excluded_nodes="n[01-03]", features="ib&nvlink",
            dependency="afterok:1(unfulfilled)", resv_name="maint", het_job_id=70)
    assert (r.partition, r.excluded_nodes, r.constraint, r.dependency, r.reservation, r.het_job_id) == (
        "gpu,big", ("n01", "n02", "n03"), "ib&nvlink", "afterok:1(unfulfilled)", "maint", 70)
    plain = parse_squeue((DATA / "squeue_22.05.json").read_text())[0][0]
    assert (plain.partition, plain.excluded_nodes, plain.dependency, plain.reservation) == ("gpu", (), "", "")


def test_an_excluded_job_is_started_only_where_it_may_run(tmp_path: Path) -> None:
    """The headline bug: a hinted one-node job with --exclude=n01,n02,n03 was started on n01,
    and Slurm kept it pending forever. Every node but n15 is excluded here."""
    fake = FakeSlurm([job(70, excluded_nodes="n[01-14,16]")], bad=set())
    (out,) = cycles(backend(fake, tmp_path), 1)
    (start,) = [a for a in out.actions if isinstance(a, Start)]
    assert set(start.assignment) == {"n15"}


def test_a_job_that_fits_nowhere_it_may_run_waits_with_a_reason_and_blocks_nobody(tmp_path: Path) -> None:
    x = job(70, excluded_nodes="n[01-16]")
    y = job(71, submit_time=PENDING["submit_time"] + 1)
    (out,) = cycles(backend(FakeSlurm([x, y], bad=set()), tmp_path), 1)
    assert starts(out) == ["71"]
    reason = next(r for r in out.reasons if r.job_id == "70")
    assert reason.code.value == "needs_unmet"
    assert reason.detail.startswith("0 GPUs on the nodes outside its --exclude list; the cluster has")


def test_a_users_nodelist_is_left_to_slurm_once_and_explain_says_why(tmp_path: Path) -> None:
    fake = FakeSlurm([job(70, required_nodes="n05"), job(71, resv_name="maint")], bad=set())
    be = backend(fake, tmp_path)
    out = cycles(be, 3)
    assert all(not starts(o) for o in out) and not out[-1].snapshot.pending  # type: ignore[union-attr]
    releases = fake.releases()
    assert len(releases) == 1 and releases[0][2] == "jobid=70,71"  # released once, both
    held = {h.job_id: h for h in be.held_back()}
    assert held["70"].kind == "rules" and held["70"].left_to_slurm and held["70"].held
    assert held["70"].reason == "it asks for nodes n05 (--nodelist)"
    assert be.last is not None and not set(be.last.leased) & {"70", "71"}
    (row, _) = held_back_rows([held["70"], held["71"]], "fifo")
    assert row.reason == "left_to_slurm" and row.detail.startswith(
        "it asks for nodes n05 (--nodelist): railgang does not model that")


def test_a_job_left_to_slurm_is_released_after_the_cycles_starts(tmp_path: Path) -> None:
    """Released first, Slurm could place it on the nodes the cycle pins a gang to (the 24.11
    suites in CI: a --licenses job landed on the h100 node the h100 gang's Start named)."""
    fake = FakeSlurm([job(70, licenses="fluent:1"), job(71, submit_time=PENDING["submit_time"] + 1)],
                     bad=set())
    (out,) = cycles(backend(fake, tmp_path), 1)
    assert starts(out) == ["71"]
    order = [("start" if stdin is not None else "release" if argv[1:2] == ("update",) else "")
             for argv, stdin in fake.calls if argv[0] == "scontrol"]
    order = [o for o in order if o]
    assert order == ["start", "release"], order
    assert fake.releases()[0][2] == "jobid=70"


def test_a_job_left_to_slurm_in_a_cycle_without_actions_is_released_by_the_next(tmp_path: Path) -> None:
    fake = FakeSlurm([job(70, licenses="fluent:1")], bad=set())
    be = backend(fake, tmp_path)
    cycles(be, 1)
    be.observe(PENDING["submit_time"] + 60)
    assert [r[2] for r in fake.releases()] == ["jobid=70"]  # once


def test_a_job_railgang_pinned_is_planned_again_not_left_to_slurm(tmp_path: Path) -> None:
    fake = FakeSlurm([job(70)], bad=set())
    be = backend(fake, tmp_path)
    (out,) = cycles(be, 1)
    (start,) = [a for a in out.actions if isinstance(a, Start)]
    # Slurm did not run it on its pin (long past the starting grace): it waits again, ours
    fake.jobs = [job(70, required_nodes=",".join(start.assignment), eligible_time=PENDING["submit_time"])]
    be.observe(PENDING["submit_time"] + 3600)
    assert be.last is not None and [j.job_id for j in be.last.snapshot.pending] == ["70"]
    assert not be.last.left and not fake.releases()


def test_an_unmet_dependency_holds_no_gpus_and_keeps_its_lease(tmp_path: Path) -> None:
    """A gang needing every GPU starts beside a job waiting on its dependency; once Slurm drops
    the dependency the job is scheduled as usual."""
    dep = job(70, dependency="afterok:1(unfulfilled)", submit_time=PENDING["submit_time"] - 60)
    gang = job(71, admin_comment="railgang:tp=8,pp=1,dp=13;class=3", node_count=13,
               tres_per_node="gres:gpu:8")
    fake = FakeSlurm([dep, gang], bad=set())
    be = backend(fake, tmp_path)
    (out,) = cycles(be, 1)
    assert starts(out) == ["71"]
    assert be.last is not None and "70" in be.last.leased and "70" not in {
        j.job_id for j in be.last.snapshot.pending}
    (h,) = be.held_back()
    assert (h.job_id, h.kind, h.left_to_slurm) == ("70", "dependency", False)
    (row,) = held_back_rows([h], "fifo")
    assert row.reason == "waiting_on_dependency" and "afterok:1(unfulfilled)" in row.detail
    fake.jobs = [{**dep, "dependency": ""}]
    (out,) = cycles(be, 1)
    assert starts(out) == ["70"]


def test_the_narrow_read_carries_the_exclude_list_and_reads_it_for_jobs_no_full_read_saw() -> None:
    """22.05's squeue -O has no field for --exclude (it answers "Invalid job format
    specification: ExcNodes"): the list comes from the full read, and ``-o %x`` for new jobs."""
    assert "excluded_nodes" in CARRIED
    mark = new_mark()
    argv = excluded_argv(["70", "71"], mark)
    assert argv[-2:] == ["-o", f"%i{mark}%x{mark}"] and "70,71" in argv
    text = f"70{mark}n[01-03]{mark}\n71{mark}(null){mark}\n"
    lists = parse_comments(text, ["70", "71"], mark, "squeue -o %x")
    got = with_excluded([rec(), squeue_job(job(71))], {"70": lists["70"], "71": lists["71"]})
    assert [j.excluded_nodes for j in got] == [("n01", "n02", "n03"), ()]
    with pytest.raises(NarrowProblem):
        with_excluded([rec()], {"70": "n[01-"})


def _pinned(start: Start, now: float, **fields: Any) -> dict[str, Any]:
    """Job 70 as 22.05 lists it just after ``start`` pinned it: lease ended, ReqNodeList set."""
    return job(70, **{"required_nodes": ",".join(start.assignment), "eligible_time": int(now),
                      "start_time": int(now), "state_reason": "None", **fields})


class DrainingSlurm(FakeSlurm):
    """The capture's Slurm, with the nodes in ``drained`` drained by an admin."""

    drained: frozenset[str] = frozenset()

    def __call__(self, argv, env, timeout_s, stdin):  # type: ignore[no-untyped-def]
        rc, out, err = super().__call__(argv, env, timeout_s, stdin)
        if argv[0] == "sinfo" and self.drained:
            raw = json.loads(out)
            for n in raw["nodes"]:
                if n["name"] in self.drained:
                    n["state_flags"] = ["DRAIN"]
            out = json.dumps(raw)
        return rc, out, err


@pytest.mark.parametrize("change", ["excluded", "partition", "drained", "none"])
def test_a_start_pinned_where_the_job_may_no_longer_run_is_over_at_once(tmp_path: Path,
                                                                         change: str) -> None:
    """A Start planned on a record its owner changed since (``scontrol update ExcNodeList=`` or
    ``Partition=`` while the job waited, unseen by the narrow read): Slurm takes the pin and keeps
    the job pending (22.05: BadConstraints, priority 0). A node drained since: Slurm keeps it
    pending (ReqNodeNotAvail) and starts nothing new there. Seen the next cycle, that Start is
    over: the job is placed again where it may run, its old node not counted as taken. A Start
    its rules still allow waits out its grace as before (Slurm is about to run it)."""
    fake = DrainingSlurm([job(70)], bad=set())
    be = backend(fake, tmp_path)
    (out,) = cycles(be, 1)
    (first,) = [a for a in out.actions if isinstance(a, Start)]
    (node,) = first.assignment
    if change == "drained":
        fake.drained = frozenset({node})
        fake.jobs = [_pinned(first, NOW + 10, state_reason="ReqNodeNotAvail")]
    elif change == "excluded":
        fake.jobs = [_pinned(first, NOW + 10, excluded_nodes=node, state_reason="BadConstraints",
                             priority=0)]
    elif change == "partition":
        fake.jobs = [_pinned(first, NOW + 10, partition="nowhere", state_reason="BadConstraints",
                             priority=0)]
    else:
        fake.jobs = [_pinned(first, NOW + 10)]
    out = run_cycle(be, registry.get("fifo"), SimClock(NOW + 10), random.Random(0))
    again = [a for a in out.actions if isinstance(a, Start)]
    assert be.last is not None
    free = be.last.snapshot.free.get(node, frozenset())
    starting = [h for h in be.held_back() if h.kind == "starting"]
    if change == "none":
        assert again == [] and len(free) == 7  # Slurm is about to run it there: its GPU is taken
        # explain says so (it said `gone` of such a job until Slurm ran it)
        (h,) = starting
        assert h.job_id == "70" and h.reason == f"pinned to {node}; squeue's reason None"
        (row,) = held_back_rows(starting, "fifo")
        assert (row.state, row.reason) == ("waiting", "starting")
        assert row.detail == f"railgang started it (pinned to {node}; squeue's reason None); Slurm has not run it yet"
        return
    assert starting == []  # that Start is over
    if change == "drained":
        (second,) = again
        assert node not in second.assignment and free == frozenset()  # a drained node has none
    elif change == "excluded":
        (second,) = again
        assert node not in second.assignment and len(free) == 8
    else:  # no node of its partition now: it waits, holding nothing
        assert again == [] and len(free) == 8
        assert "70" in [j.job_id for j in be.last.snapshot.pending]


@pytest.mark.parametrize("hold", ["JobHeldUser", "JobHeldAdmin"])
def test_a_started_job_its_owner_holds_frees_its_gpus_and_is_not_started_again(
        tmp_path: Path, hold: str) -> None:
    """``scontrol hold`` on a job railgang pinned a moment ago (priority 0, reason JobHeldUser):
    Slurm will not run it until released, so its GPUs are not counted as taken for the rest of
    the pin's grace, and railgang does not start it again, even where its pin is no longer
    allowed (an exclude list changed too): a Start would be planned on GPUs its owner holds back
    (and before, a held job pinned where it may no longer run got one more Start)."""
    fake = FakeSlurm([job(70)], bad=set())
    be = backend(fake, tmp_path)
    (out,) = cycles(be, 1)
    (first,) = [a for a in out.actions if isinstance(a, Start)]
    (node,) = first.assignment
    for fields in ({}, {"excluded_nodes": node}):
        fake.jobs = [_pinned(first, NOW + 10, state_reason=hold, priority=0, **fields)]
        n = len(fake.calls)
        out = run_cycle(be, registry.get("fifo"), SimClock(NOW + 10), random.Random(0))
        assert not [a for a in out.actions if isinstance(a, Start)]
        assert not [c for c in fake.calls[n:] if c[0][0] == "scontrol" and c[1] is not None]
        assert be.last is not None and len(be.last.snapshot.free.get(node, frozenset())) == 8
        assert "70" not in [j.job_id for j in be.last.snapshot.pending]
        assert "70" in be.last.leased  # railgang's to place once released, not Slurm's
        (h,) = be.held_back()  # explain says so (before: `gone` until released)
        assert (h.job_id, h.kind, h.reason) == ("70", "held", f"squeue's reason {hold}")
        (row,) = held_back_rows([h], "fifo")
        assert (row.state, row.reason) == ("waiting", "held")
        assert row.detail == (f"on hold (squeue's reason {hold}): it holds no GPUs and is placed "
                              "once released (scontrol release)")


def test_a_job_left_to_slurm_on_a_limit_keeps_that_row_when_its_reason_flickers(tmp_path: Path) -> None:
    """Slurm holds a job railgang pinned on a QOS limit: it is left to Slurm at once. When
    Slurm's reason then reads ``None`` for a moment inside the old pin's grace, the job looks
    like one about to run; ``explain`` keeps its ``left_to_slurm`` row, one row for the job, not
    the ``starting`` row (CI's 24.11 run of test_site_e2e's QOS-limit job caught this race)."""
    fake = FakeSlurm([job(70)], bad=set())
    be = backend(fake, tmp_path)
    (out,) = cycles(be, 1)
    (first,) = [a for a in out.actions if isinstance(a, Start)]
    fake.jobs = [_pinned(first, NOW + 10, state_reason="QOSMaxGRESPerUser")]
    run_cycle(be, registry.get("fifo"), SimClock(NOW + 10), random.Random(0))
    assert [(h.job_id, h.left_to_slurm) for h in be.held_back()] == [("70", True)]
    fake.jobs = [_pinned(first, NOW + 10)]  # the reason flickers; still inside the grace
    out = run_cycle(be, registry.get("fifo"), SimClock(NOW + 20), random.Random(0))
    assert not [a for a in out.actions if isinstance(a, Start)]
    held = be.held_back()
    assert [(h.job_id, h.kind, h.left_to_slurm) for h in held] == [("70", "rules", True)]
    (row,) = held_back_rows(held, "fifo")
    assert row.reason == "left_to_slurm"


def test_the_exclude_list_is_read_again_only_of_a_started_job_slurm_will_not_run() -> None:
    """A job started a moment ago is usually run by Slurm before the next cycle: its list costs
    no read. Once Slurm says it will not run it where it is pinned (22.05: BadConstraints and
    priority 0; any reason that is not a queue reason), the list is read again."""
    fresh, about_to_run = squeue_job(job(71)), rec(state_reason="None", required_nodes="n01")
    refused = squeue_job(job(72, state_reason="BadConstraints", priority=0, required_nodes="n01"))
    held = squeue_job(job(73, priority=0, required_nodes="n01"))
    plain = squeue_job({**job(74), "admin_comment": ""})  # not railgang's: never read
    recs = [fresh, about_to_run, refused, held, plain]
    assert refused_pin(refused) and refused_pin(held) and not refused_pin(about_to_run)
    assert exclude_reads(recs, full={"70", "72", "73", "74"}, started={"70", "72", "73"}) == ["71", "72", "73"]
    assert exclude_reads(recs, full={"70", "71", "72", "73", "74"}, started=set()) == []
