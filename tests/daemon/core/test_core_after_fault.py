"""A job a node failure requeued goes first in its priority class (issue 20; docs/failures.md)."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core import Decision, Start, decide
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies.registry import get, names
from tests.daemon.core.core_builders import cluster, first_fit, job


def run(snap: Snapshot, policy: str) -> Decision:
    return decide(snap, get(policy), snap.now, random.Random(0), placer=first_fit)


def started(d: Decision) -> list[str]:
    return [a.job_id for a in d.actions if isinstance(a, Start)]


@pytest.mark.parametrize("policy", names())
def test_a_job_requeued_by_a_node_failure_starts_before_older_jobs_of_its_class(policy: str) -> None:
    # one node free: the older job would go first; the failed-over gang is placed instead
    snap = (cluster(2).running(job("r").gpus(8).work(3600))
            .pending(job("old").gpus(8).at(1), job("failed").gpus(8).at(50).with_(after_fault=True))
            .at(100).build())
    assert started(run(snap, policy)) == ["failed"]


def test_it_stays_behind_a_higher_class() -> None:
    snap = (cluster(2).running(job("r").gpus(8).work(3600))
            .pending(job("serving").gpus(8).at(60).cls(0),
                     job("failed").gpus(8).at(1).cls(3).with_(after_fault=True))
            .at(100).build())
    assert started(run(snap, "fifo")) == ["serving"]


def test_without_the_mark_the_policy_order_stands() -> None:
    snap = (cluster(2).running(job("r").gpus(8).work(3600))
            .pending(job("old").gpus(8).at(1), job("new").gpus(8).at(50)).at(100).build())
    assert started(run(snap, "fifo")) == ["old"]
