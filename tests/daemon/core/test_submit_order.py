"""FIFO's plan order kept by a backend (``SnapshotIndex.submit_order``) is the one derived from
the queue, and a what-if with another queue does not inherit it."""

from __future__ import annotations

from railgang.daemon.core.model.plan import submit_order
from railgang.daemon.core.model.queue_order import rigid_by_submit
from railgang.daemon.core.model.snapshot import rebuild_index
from railgang.daemon.core.policies.registry import get
from tests.daemon.core.core_builders import cluster, job


def test_the_order_is_submit_time_then_job_id_at_the_requested_size() -> None:
    snap = cluster(2).pending(job("b").gpus(8).at(5), job("a").gpus(4).at(5), job("c").gpus(2).at(1)).build()
    assert [(x.job_id, x.replicas, x.min_replicas) for x in rigid_by_submit(snap.pending)] == [
        ("c", 2, 2), ("a", 4, 4), ("b", 8, 8)]


def test_fifo_plans_the_same_from_a_kept_order_and_without() -> None:
    snap = cluster(2).pending(*(job(f"j{i}").gpus(1 + i % 8).at(i % 3) for i in range(9))).build()
    kept = snap.replace(index=rebuild_index(snap))
    assert kept.index is not None and kept.index.submit_order == submit_order(snap)
    for name in ("fifo", "fifo-greedy"):
        assert get(name).plan(kept, 0.0) == get(name).plan(snap, 0.0)


def test_a_what_if_with_another_queue_keeps_the_order_of_that_queue() -> None:
    snap = cluster(2).pending(job("a").gpus(8).at(1), job("b").gpus(8).at(2)).build()
    snap = snap.replace(index=rebuild_index(snap))
    fewer = snap.replace(pending=snap.pending[1:])
    assert [x.job_id for x in submit_order(fewer)] == ["b"]
    assert fewer.index == rebuild_index(fewer)  # the kept counts, the queue's own order and facts
