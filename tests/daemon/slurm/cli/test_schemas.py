"""One reader per Slurm JSON schema, chosen by the document's ``meta`` (issue 17).

data/*_22.05.*, *_24.11.* and *_26.05.* were recorded by capture_versions.py from real clusters
(22.05 natively, 24.11 in a trixie container, 26.05 in a sid container; 26.05 also pinned to
each data_parser version it serves, *_26.05_v0.0.4N.json), the same scenario on each: a hinted
tp8 job with an unlimited time limit, a job shrunk from 2 nodes to 1, a small one, a requeued one (pending,
BeginTime), a hinted tp8,dp2 gang (pending, Resources), a held one; n04 drained.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from railgang.daemon.config import SlurmSettings
from railgang.daemon.ledger.sacct import parse_sacct
from railgang.daemon.slurm.cli.backend import CliBackend
from railgang.daemon.slurm.cli.records import (
    SqueueJob,
    parse_sinfo,
    parse_squeue,
    parse_sshare,
    topology_from_show,
)
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.daemon.slurm.cli.schemas import (
    PINNED,
    Schema,
    SchemaProblem,
    schema_of,
    state_word,
)
from railgang.daemon.slurm.cli.snapshot import Observation, build_observation
from railgang.errors import InputError, SlurmSchemaError
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf
from tests.daemon.slurm.cli.capture import DATA

VERSIONS = ["22.05", "24.11", "26.05"]
PINNED_26 = ["26.05_v0.0.42", "26.05_v0.0.43", "26.05_v0.0.44"]  # squeue/sinfo only


def text(kind: str, version: str) -> str:
    return (DATA / f"{kind}_{version}.json").read_text()


def doc(kind: str, version: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text(kind, version))
    return loaded


@pytest.mark.parametrize(("kind", "version", "schema"), [
    ("squeue", "22.05", Schema("v0.0.38", "22.05.8")),
    ("sinfo", "22.05", Schema("v0.0.38", "22.05.8")),
    ("sacct", "22.05", Schema("v0.0.38", "22.05.8")),  # openapi/dbv0.0.38
    ("squeue", "24.11", Schema("v0.0.42", "24.11.5")),
    ("sinfo", "24.11", Schema("v0.0.42", "24.11.5")),
    ("sacct", "24.11", Schema("v0.0.42", "24.11.5")),
    ("squeue", "26.05", Schema("v0.0.45", "26.05.5")),
    ("sinfo", "26.05", Schema("v0.0.45", "26.05.5")),
    ("sacct", "26.05", Schema("v0.0.45", "26.05.5")),
    ("squeue", "26.05_v0.0.42", Schema("v0.0.42", "26.05.5")),
    ("sinfo", "26.05_v0.0.43", Schema("v0.0.43", "26.05.5")),
    ("squeue", "26.05_v0.0.44", Schema("v0.0.44", "26.05.5")),
])
def test_the_schema_is_what_meta_says(kind: str, version: str, schema: Schema) -> None:
    assert schema_of(doc(kind, version), kind) == schema


UNKNOWN_META: dict[str, Any] = {
    "no-meta": None,
    "meta-not-an-object": [1],
    "no-plugin": {"slurm": {"release": "24.11.5"}},
    "newer-data-parser": {"plugin": {"data_parser": "data_parser/v0.0.46"}},
    "openapi-v0.0.39": {"plugin": {"type": "openapi/v0.0.39"}},
    "garbage": {"plugin": {"data_parser": "x" * 500, "type": 7}},
}


@pytest.mark.parametrize("meta", list(UNKNOWN_META.values()), ids=list(UNKNOWN_META))
@pytest.mark.parametrize("version", VERSIONS)
def test_an_unknown_schema_is_refused_never_an_empty_cluster(meta: Any, version: str) -> None:
    for kind, parse in (("squeue", parse_squeue), ("sinfo", parse_sinfo)):
        d = doc(kind, version)
        d.pop("meta")
        if meta is not None:
            d["meta"] = meta
        with pytest.raises(SchemaProblem, match=f"{kind} --json: .*(schema|meta)"):
            parse(json.dumps(d))
    d = doc("sacct", version)
    d["meta"] = meta or {}
    with pytest.raises(InputError, match=r"schema|meta"):
        parse_sacct(json.dumps(d))


def test_24_11_output_read_as_22_05_is_refused_not_empty() -> None:
    """The failure issue 17 found: 24.11 JSON through the 22.05 reader read 0 jobs, 0 nodes."""
    legacy = {"plugin": {"type": "openapi/v0.0.38"}}
    with pytest.raises(SchemaProblem, match="none of its 6 job records could be read"):
        parse_squeue(json.dumps({**doc("squeue", "24.11"), "meta": legacy}))
    with pytest.raises(SchemaProblem):  # no 'nodes' list there: read as an empty node list
        parse_sinfo(json.dumps({**doc("sinfo", "24.11"), "meta": legacy,
                                "nodes": [{"name": ["n01"]}]}))
    with pytest.raises(InputError, match="none of the 6 records"):
        parse_sacct(json.dumps({**doc("sacct", "24.11"), "meta": {"plugin": {
            "type": "openapi/dbv0.0.38"}}}))


def _logical(job: SqueueJob) -> SqueueJob:
    """A job without the wall-clock times of its capture (the two runs were minutes apart)."""
    return replace(job, submit_time=0.0, eligible_time=0.0, start_time=0.0,
                   resize_time=float(job.resize_time > 0))


def observe(version: str) -> Observation:
    jobs, job_notes = parse_squeue(text("squeue", version))
    nodes, node_notes = parse_sinfo(text("sinfo", version))
    release = version.split("_")[0]
    shares, _ = parse_sshare((DATA / f"sshare_{release}.txt").read_text())
    topo = topology_from_show((DATA / f"scontrol_topology_{release}.txt").read_text())
    now = max(j.start_time for j in jobs) + 30
    return build_observation(now, jobs, nodes, fabric_from_conf(parse_topology(topo, "show")),
                             shares, [*job_notes, *node_notes])


@pytest.mark.parametrize("version", ["24.11", "26.05", *PINNED_26])
def test_every_version_gives_the_same_logical_snapshot_as_22_05(version: str) -> None:
    old, new = observe("22.05"), observe(version)
    assert old.skipped == new.skipped == ()
    assert {k: _logical(j) for k, j in old.jobs.items()} == {
        k: _logical(j) for k, j in new.jobs.items()}
    # v0.0.45 (26.05's default) does not say who set a reason (the test at the end)
    assert {k: replace(n, reason_by="") for k, n in old.nodes_raw.items()} == {
        k: replace(n, reason_by="") for k, n in new.nodes_raw.items()}
    a, b = old.snapshot, new.snapshot
    assert a.nodes == b.nodes and a.free == b.free and a.accounts == b.accounts
    assert {k: (r.assignment, r.replicas, replace(r.job.request, submit_time=0.0))
            for k, r in a.running.items()} == {
        k: (r.assignment, r.replicas, replace(r.job.request, submit_time=0.0))
        for k, r in b.running.items()}
    assert [replace(j.request, submit_time=0.0) for j in a.pending] == [
        replace(j.request, submit_time=0.0) for j in b.pending]


@pytest.mark.parametrize("version", VERSIONS)
def test_what_each_version_says_of_the_scenario(version: str) -> None:
    ids = json.loads((DATA / f"jobs_{version}.json").read_text())
    jobs = {j.job_id: j for j in parse_squeue(text("squeue", version))[0]}
    assert jobs[ids["hinted"]].time_limit_s is None  # unlimited (24.11: {infinite: true})
    assert jobs[ids["hinted"]].tag is not None and jobs[ids["hinted"]].tag.tp == 8
    assert jobs[ids["small"]].time_limit_s == 1800.0
    assert jobs[ids["resized"]].allocation == (("n03", tuple(range(8))),)
    assert jobs[ids["resized"]].resize_time > 0
    assert (jobs[ids["requeued"]].state, jobs[ids["requeued"]].reason,
            jobs[ids["requeued"]].restarts) == ("PENDING", "BeginTime", 1)
    gang = jobs[ids["gang"]]
    assert (gang.reason, gang.gpus_requested, gang.tag and gang.tag.dp) == ("Resources", 16, 2)
    assert (jobs[ids["held"]].reason, jobs[ids["held"]].priority) == ("JobHeldUser", 0)
    nodes = {n.name: n for n in parse_sinfo(text("sinfo", version))[0]}
    assert sorted(nodes) == ["n01", "n02", "n03", "n04"]
    assert (nodes["n04"].state, nodes["n04"].reason) == ("drain", "lame IB link")
    # 24.11+ group nodes by partition and state unless asked --Node: n02 kept its own features
    assert nodes["n02"].features == {"rg_lame"} and nodes["n01"].features == frozenset()
    assert {nodes[n].gpus for n in nodes} == {8}


@pytest.mark.parametrize("version", VERSIONS)
def test_sacct_segments_are_the_same_on_both(version: str) -> None:
    segs = parse_sacct(text("sacct", version))
    shape = [(s.job_id, s.state, s.nodes, s.gpus, s.end is None, s.time_limit_s) for s in segs]
    assert shape == [("1", "RUNNING", "n01", 8, True, None),
                     ("2", "RESIZING", "n[03-04]", 16, False, 3600),
                     ("2", "RUNNING", "n03", 8, True, 3600),
                     ("3", "RUNNING", "n02", 4, True, 1800),
                     ("4", "REQUEUED", "n02", 4, False, 1200)]


@pytest.mark.parametrize(("states", "word"), [
    (["RUNNING"], "RUNNING"), (["PENDING", "REQUEUED"], "REQUEUED"),
    (["PENDING", "RESIZING"], "RESIZING"), (["RUNNING", "COMPLETING"], "COMPLETING"),
    (["PENDING", "REQUEUE_HOLD"], "REQUEUE_HOLD"), (["RUNNING", "UPDATE_DB"], "RUNNING"),
    ([], []), ("RUNNING", "RUNNING"), ([1], [1]),
], ids=repr)
def test_state_word(states: Any, word: Any) -> None:
    assert state_word(states) == word


@pytest.mark.parametrize("version", VERSIONS)
def test_the_training_helper_reads_its_world_on_every_version(version: str) -> None:
    from railgang.training import world_from_squeue

    ids = json.loads((DATA / f"jobs_{version}.json").read_text())
    world = world_from_squeue(doc("squeue", version), ids["resized"])
    assert (world.nodes, world.gpus, world.state) == (("n03",), 8, "RUNNING")


# ---- hostile v0.0.42 records: one bad record costs only itself ------------------------------
SQUEUE_42 = doc("squeue", "24.11")
RUNNING_42 = next(j for j in SQUEUE_42["jobs"] if j["job_id"] == 1)
PENDING_42 = next(j for j in SQUEUE_42["jobs"] if j["job_id"] == 5)


def bad(base: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    return {**copy.deepcopy(dict(base)), "job_id": 66, **fields}


BAD_42 = {
    "state-empty-list": bad(PENDING_42, job_state=[]),
    "state-of-numbers": bad(PENDING_42, job_state=[1, 2]),
    "state-unknown": bad(PENDING_42, job_state=["LEVITATING"]),
    "priority-infinite": bad(PENDING_42, priority={"set": True, "infinite": True, "number": 0}),
    "node-count-text": bad(PENDING_42, node_count={"set": True, "infinite": False, "number": "2"}),
    "limit-nan": bad(PENDING_42, time_limit={"set": True, "infinite": False, "number": math.nan}),
    "allocation-not-a-list": bad(RUNNING_42, job_resources={"nodes": {"allocation": 7}}),
    "allocation-of-numbers": bad(RUNNING_42, job_resources={"nodes": {"allocation": [1]}}),
    "resources-text": bad(RUNNING_42, job_resources="n01"),
}


@pytest.mark.parametrize("record", list(BAD_42.values()), ids=list(BAD_42))
def test_one_bad_v0_0_42_job_costs_only_itself(record: Any) -> None:
    d = {**SQUEUE_42, "jobs": [RUNNING_42, record, PENDING_42]}
    jobs, problems = parse_squeue(json.dumps(d))
    ids = {j.job_id for j in jobs}
    assert {"1", "5"} <= ids <= {"1", "5", "66"}
    if "66" not in ids:
        assert any("job 66" in p for p in problems)


def test_a_bad_sinfo_group_costs_only_its_nodes() -> None:
    d = doc("sinfo", "24.11")
    d["sinfo"] = [7, {"nodes": {"nodes": "n09"}}, {"nodes": {"nodes": [5]}}, *d["sinfo"]]
    nodes, problems = parse_sinfo(json.dumps(d))
    assert sorted(n.name for n in nodes) == ["n01", "n02", "n03", "n04"]
    assert [p.split(":")[1].strip() for p in problems] == ["sinfo[0]", "sinfo[1]", "sinfo[2]"]


def test_a_node_in_two_partitions_is_one_node() -> None:
    d = doc("sinfo", "24.11")
    d["sinfo"] = d["sinfo"] + [copy.deepcopy(g) for g in d["sinfo"]]
    nodes, problems = parse_sinfo(json.dumps(d))
    assert sorted(n.name for n in nodes) == ["n01", "n02", "n03", "n04"] and problems == []


# ---- the backend: pins the version where the CLI takes one; refuses loudly ----------------------
class FakeSlurm:
    """squeue/sinfo answering the recorded output of ``version``; remembers every argv."""

    def __init__(self, version: str, meta: Any = None) -> None:
        self.version, self.meta, self.calls = version, meta, []

    def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                 stdin: str | None) -> tuple[int, str, str]:
        self.calls.append(tuple(argv))
        if self.version == "22.05" and argv[1] != "--json":
            return 2, "", f"{argv[0]}: option '--json' doesn't allow an argument"
        pinned = f"{self.version}_{argv[1].removeprefix('--json=')}"
        d = doc(argv[0], pinned if (DATA / f"{argv[0]}_{pinned}.json").exists() else self.version)
        if self.meta is not None:
            d["meta"] = self.meta
        return 0, json.dumps(d).replace("/", "\\/"), ""  # as Slurm writes it: "data_parser\/v0.0.42"


ALL = "--states=all"  # 24.11+ leave ended jobs out by default; 22.05 lists them regardless
NODE = "--Node"  # 24.11+ group nodes by partition and state only, losing per-node features


def backend(fake: FakeSlurm, tmp_path: Any) -> CliBackend:
    topo = tmp_path / "topology.conf"
    topo.write_text(topology_from_show(
        (DATA / f"scontrol_topology_{fake.version}.txt").read_text()))
    # the JSON every cycle: these tests are about its schemas (the narrow read between full
    # reads has its own tests, test_narrow.py and test_narrow_slurm.py)
    return CliBackend(SlurmSettings(topology=topo, narrow_full_read_s=0), SlurmRunner(exec_fn=fake),
                      read_shares=False)


@pytest.mark.parametrize(("version", "second"), [("22.05", "--json"),
                                                 ("24.11", f"--json={PINNED}"),
                                                 ("26.05", f"--json={PINNED}")])
def test_the_backend_pins_the_schema_where_slurm_lets_it(version: str, second: str,
                                                        tmp_path: Any) -> None:
    fake = FakeSlurm(version)
    b = backend(fake, tmp_path)
    first = b.observe(2e9)
    b.observe(2e9)
    assert fake.calls == [("squeue", "--json", ALL), ("sinfo", second, NODE),  # squeue's meta
                          ("squeue", second, ALL), ("sinfo", second, NODE)]
    assert len(first.snapshot.nodes) == 4 and len(first.jobs) == 6


def test_an_unknown_default_schema_is_asked_again_pinned(tmp_path: Any) -> None:
    class NewDefault(FakeSlurm):
        def __call__(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float,
                     stdin: str | None) -> tuple[int, str, str]:
            self.meta = None if argv[1] == f"--json={PINNED}" else {
                "plugin": {"data_parser": "data_parser/v0.0.99"}}
            return super().__call__(argv, env, timeout_s, stdin)

    fake = NewDefault("24.11")
    obs = backend(fake, tmp_path).observe(2e9)
    assert len(obs.jobs) == 6
    assert fake.calls == [("squeue", "--json", ALL), ("squeue", f"--json={PINNED}", ALL),
                          ("sinfo", f"--json={PINNED}", NODE)]


def test_the_backend_refuses_an_unknown_schema_loudly(tmp_path: Any,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeSlurm("22.05", meta={"plugin": {"type": "openapi/v0.0.37"}})
    with pytest.raises(SlurmSchemaError, match=r"unknown output schema 'openapi/v0\.0\.37'") as info:
        backend(fake, tmp_path).observe(2e9)
    assert info.value.command == "squeue"
    assert any("unknown output schema" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05_v0.0.42", "26.05_v0.0.44"])
def test_who_set_a_nodes_reason_is_read(version: str) -> None:
    """reason_set_by_user (22.05), reason.user (24.11+): failures/respond.py tells Slurm's own
    drains from an admin's by it (issue 38 row 1). A node without a reason has no setter."""
    nodes = {n.name: n for n in parse_sinfo(text("sinfo", version))[0]}
    assert (nodes["n04"].reason, nodes["n04"].reason_by) == ("lame IB link", "root")
    assert nodes["n01"].reason_by == ""


def test_a_schema_that_does_not_say_who_set_a_reason_reads_unknown() -> None:
    nodes = {n.name: n for n in parse_sinfo(text("sinfo", "26.05"))[0]}
    assert (nodes["n04"].reason, nodes["n04"].reason_by) == ("lame IB link", "")
