"""What a user can change about a waiting job does not buy it more than its own limits allow
(issue 18 rows 5 and 8, docs/security.md): a user's ``--begin`` (kept in the tag by
job_submit.lua) holds the job back and its lease is never renewed to before it; a class 0-2 job
whose grant was revoked, or that was moved to an ungranted account or QOS, is scheduled as class
3 — re-checked against the grants file every cycle."""

from __future__ import annotations

import json
from pathlib import Path

from railgang.daemon.slurm.cli.class_grants import ClassGrants, parse_grants, read_grants
from railgang.daemon.slurm.cli.parse import parse_tag
from railgang.daemon.slurm.cli.records import parse_sinfo, parse_squeue, topology_from_show
from railgang.daemon.slurm.cli.snapshot import Observation, build_observation
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf
from tests.daemon.slurm.cli.capture import DATA, NOW

LEASE_S = 120.0


def observe(edit: dict[int, dict[str, object]], *, grants: ClassGrants | None = None,
            now: float = NOW) -> Observation:
    raw = json.loads((DATA / "squeue_mixed.json").read_text())
    for job in raw["jobs"]:
        job.update(edit.get(job["job_id"], {}))
    jobs, _ = parse_squeue(json.dumps(raw))
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(topology_from_show((DATA / "scontrol_topology.txt").read_text())))
    return build_observation(now, jobs, nodes, fabric, lease_s=LEASE_S, grants=grants)


def test_the_begin_item_round_trips_through_the_tag() -> None:
    tag = parse_tag("railgang:tp=2,pp=1,dp=3;class=3;begin=1796143800")
    assert tag is not None and tag.begin == 1796143800.0
    assert parse_tag(tag.render()) == tag


def test_a_job_waiting_for_its_own_begin_is_neither_placed_nor_leased_early() -> None:
    begin = NOW + 86400
    obs = observe({12: {"admin_comment": f"railgang:tp=2,pp=1,dp=3;class=3;begin={begin:.0f}"}})
    assert [j.job_id for j in obs.snapshot.pending] == ["11"]
    assert "12" not in obs.leased  # a renewal to now + lease would pull its begin forward
    # one lease before its begin it is leased again (the renewal lands at or after the begin) ...
    near = observe({12: {"admin_comment": f"railgang:tp=2,pp=1,dp=3;class=3;begin={NOW + 60:.0f}"}})
    assert "12" in near.leased and "12" not in [j.job_id for j in near.snapshot.pending]
    # ... and once it has passed, it is the core's to place like any other
    after = observe({12: {"admin_comment": f"railgang:tp=2,pp=1,dp=3;class=3;begin={NOW - 1:.0f}"}})
    assert [j.job_id for j in after.snapshot.pending] == ["11", "12"]


def test_an_ungranted_class_is_scheduled_as_batch_and_named_in_the_notes() -> None:
    granted = parse_grants("0 account team-a\n")
    assert observe({}, grants=granted).snapshot.pending[0].priority_class == 0
    revoked = parse_grants("# no grants left\n")
    obs = observe({}, grants=revoked)
    job = next(j for j in obs.snapshot.pending if j.job_id == "11")
    assert job.priority_class == 3
    assert any(n.startswith("job 11: class 0 is not granted") for n in obs.skipped)
    # moved to another account: the grant of the old one no longer counts
    moved = observe({11: {"account": "team-b"}}, grants=granted)
    assert next(j for j in moved.snapshot.pending if j.job_id == "11").priority_class == 3
    # a QOS grant counts, and so does an open class
    by_qos = observe({}, grants=parse_grants("0 qos normal\n"))
    assert next(j for j in by_qos.snapshot.pending if j.job_id == "11").priority_class == 0
    assert observe({}, grants=parse_grants("open 0\n")).snapshot.pending[0].priority_class == 0
    # running jobs keep their class: a revocation reorders the queue, it does not preempt
    assert observe({}, grants=revoked).snapshot.running["9"].job.priority_class == 1


def test_grants_file_reader_is_bounded_and_tolerant(tmp_path: Path) -> None:
    assert read_grants(tmp_path / "missing") is None
    assert read_grants(tmp_path) is None  # a directory
    big = tmp_path / "big"
    big.write_bytes(b"0 account a\n" * 200_000)
    assert read_grants(big) is None
    odd = tmp_path / "odd"
    odd.write_bytes(b"\xff\xfe0 account x\n0 account team-a\n9 account z\n0 group g\n\x00\n")
    grants = read_grants(odd)
    assert grants is not None and grants.allowed == frozenset({(0, "account", "team-a")})
