"""The metrics issue 36 item 4's alerts read: pending jobs that would fit on free GPUs
(railgang_waiting_jobs_fitting_free_gpus) and drained/down nodes by whose reason
(railgang_nodes_out)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from railgang.daemon.core.model.snapshot import Account, NodeState
from railgang.daemon.service.metrics import DaemonMetrics, jobs_fitting_free
from tests.daemon.core.core_builders import JobB, cluster, job


@pytest.mark.parametrize(("pending", "running", "want"), [
    ([], [], 0),
    ([job("p").gpus(4)], [], 1),  # an empty cluster and a job waiting: the alert's case
    ([job("p").gpus(4)], [job("r").gpus(16)], 0),  # every GPU taken: waiting is right
    ([job("p").gpus(8)], [job("r").gpus(12)], 0),  # 4 free on one node, 0 whole nodes
    ([job("p").gpus(4)], [job("r").gpus(12)], 1),  # the 4 free on n001 hold it
    ([job("big").gpus(16)], [], 1),  # two whole free nodes
    ([job("big").gpus(16)], [job("r").gpus(1)], 0),  # one whole node free: a gang must wait
    ([job("q").gpus(4).account("capped")], [job("r").gpus(8).account("capped")], 0),  # quota
], ids=["none", "fits", "full", "fragmented", "fits-in-gap", "gang-fits", "gang-waits",
        "quota-holds"])
def test_jobs_fitting_free(pending: list[JobB], running: list[JobB], want: int) -> None:
    snap = (cluster(2, 8).running(*running).pending(*pending)
            .accounts(Account("capped", quota_gpus=8)).build())
    assert jobs_fitting_free(snap) == want


def test_drained_nodes_do_not_count_as_free() -> None:
    b = cluster(2, 8).pending(job("p").gpus(4))
    b.nodes = [n.with_state(NodeState.DRAIN) for n in b.nodes]
    assert jobs_fitting_free(b.build()) == 0


@dataclass(frozen=True)
class Sinfo:
    name: str
    state: NodeState
    reason: str
    reason_by: str = ""


def test_nodes_out_by_whose_reason() -> None:
    m = DaemonMetrics()
    m.observe_nodes_out([
        Sinfo("n01", NodeState.DRAIN, "railgang: flaky: 3 node failures in 24 h"),
        Sinfo("n02", NodeState.DRAIN, "disk swap, ticket 4711", "alice"),
        Sinfo("n03", NodeState.DOWN, "Not responding", "slurm"),
        Sinfo("n04", NodeState.DOWN, "Not responding"),
        Sinfo("n05", NodeState.IDLE, ""),
        Sinfo("n06", NodeState.DRAIN, ""),  # a MAINT reservation reads drain, no reason
    ])

    def val(state: str, owner: str) -> float:
        return float(m.nodes_out.labels(state, owner)._value.get())

    assert (val("drain", "railgang"), val("drain", "other"), val("drain", "none")) == (1, 1, 1)
    assert (val("down", "slurm"), val("down", "other")) == (2, 0)
    m.observe_nodes_out([])  # all back: every series reads 0, none left stale
    assert val("drain", "other") == 0 and val("down", "slurm") == 0
