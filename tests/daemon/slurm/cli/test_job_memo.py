"""The CLI backend's memo of waiting jobs' core Jobs (snapshot.JobMemo) gives what a plain
rebuild gives, cycle after cycle, as records stay, change, lose their grant or leave."""

from __future__ import annotations

import dataclasses

from railgang.daemon.slurm.cli.class_grants import ClassGrants
from railgang.daemon.slurm.cli.records import parse_sinfo, parse_squeue, topology_from_show
from railgang.daemon.slurm.cli.snapshot import JobMemo, build_observation
from railgang.topology.conf import parse_topology
from railgang.topology.fabric import fabric_from_conf
from tests.daemon.slurm.cli.capture import DATA, NOW


def test_a_memo_gives_what_a_plain_rebuild_gives() -> None:
    jobs, _ = parse_squeue((DATA / "squeue_mixed.json").read_text())
    nodes, _ = parse_sinfo((DATA / "sinfo_mixed.json").read_text())
    fabric = fabric_from_conf(parse_topology(
        topology_from_show((DATA / "scontrol_topology.txt").read_text()), "show"))
    waiting = [j for j in jobs if j.pending and j.tag is not None]
    assert len(waiting) >= 2
    first = waiting[0]
    changed = dataclasses.replace(first, restarts=first.restarts + 1)  # requeued meanwhile
    cycles = [
        (jobs, None, frozenset()),
        (jobs, None, frozenset()),                                          # all kept
        ([changed if j is first else j for j in jobs], None, frozenset()),  # one record new
        (jobs, ClassGrants(), frozenset()),                                 # grants revoked
        (jobs, None, frozenset({waiting[1].job_id})),                       # a node failure
        ([j for j in jobs if j is not first], None, frozenset()),           # one job left
        (jobs, None, frozenset()),                                          # and came back
    ]
    memo = JobMemo()
    reused = 0
    for i, (recs, grants, fault) in enumerate(cycles):
        now = NOW + 10 * i
        plain = build_observation(now, recs, nodes, fabric, grants=grants, after_fault=fault)
        before = dict(memo._jobs)
        fast = build_observation(now, recs, nodes, fabric, grants=grants, after_fault=fault,
                                 memo=memo)
        assert fast.snapshot.pending == plain.snapshot.pending, f"cycle {i}"
        assert fast.snapshot.running == plain.snapshot.running
        reused += sum(1 for j in fast.snapshot.pending
                      if j.job_id in before and before[j.job_id][3] is j)
        assert set(memo._jobs) == {j.job_id for j in plain.snapshot.pending}
    assert reused >= len(waiting)  # the second cycle reused every waiting job's Job
