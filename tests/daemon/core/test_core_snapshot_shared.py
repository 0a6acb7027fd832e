"""What a snapshot shares with the one before it (issue 12, speed): read-only mappings taken as
they are, and a backend's index (``model/index.py``) standing in for the counts; each gives what
the plain derivation gives."""

from __future__ import annotations

from types import MappingProxyType

from railgang.daemon.core import Node
from railgang.daemon.core.model.snapshot import rebuild_index as rebuild
from tests.daemon.core.core_builders import cluster, job


def test_read_only_mappings_are_taken_as_they_are_and_a_replace_keeps_them() -> None:
    snap = cluster(2).running(job("r").gpus(4)).build()
    nodes = MappingProxyType(dict(snap.nodes))
    again = snap.replace(nodes=nodes)
    assert again.nodes is nodes and again.free is snap.free and again.running is snap.running
    assert again.total_gpus == snap.total_gpus == 16 and again.free_gpus == snap.free_gpus == 12


def test_the_usable_count_follows_the_nodes_not_the_last_answer() -> None:
    snap = cluster(2).build()
    drained = MappingProxyType({n: (Node(n, 8, state="drain") if n == "n000" else node)
                                for n, node in snap.nodes.items()})
    assert snap.total_gpus == 16
    assert snap.replace(nodes=drained).total_gpus == 8
    assert snap.replace(nodes=snap.nodes).total_gpus == 16


def test_a_backends_held_count_stands_in_for_the_running_jobs_count() -> None:
    snap = (cluster(2).running(job("a").gpus(4).account("ml"), job("b").gpus(2).account("cv"))
            .build())
    counted = snap.account_running_gpus()
    assert counted == {"ml": 4, "cv": 2}
    held = snap.replace(index=rebuild(snap))
    assert held.account_running_gpus() == counted and held == snap  # the index is not compared
    tally = held.account_running_gpus()
    tally["ml"] += 8  # each caller keeps its own tally
    assert held.account_running_gpus() == counted


def test_elastic_running_are_the_running_jobs_with_a_range_by_id() -> None:
    snap = (cluster(4).running(job("z").gpus(4).elastic(1, 4), job("r").gpus(4),
                               job("a").gpus(2).elastic(1, 8)).build())
    assert [r.job_id for r in snap.elastic_running] == ["a", "z"]
    assert all(r is snap.running[r.job_id] for r in snap.elastic_running)


def test_running_per_class_counts_each_class_and_a_backends_count_stands_in() -> None:
    snap = cluster(4).running(job("a").gpus(2).cls(1), job("b").gpus(2), job("c").gpus(2)).build()
    assert snap.running_per_class == (0, 1, 0, 2)
    indexed = snap.replace(index=rebuild(snap))
    assert indexed.running_per_class == (0, 1, 0, 2) and indexed.elastic_running == ()
    assert indexed.total_gpus == snap.total_gpus and indexed.free_gpus == snap.free_gpus
