"""The simulator's snapshots share what did not change since the last one (issue 12, speed):
at every cycle of a replay with preemptions and resizes, the shared free GPUs, nodes, usable
count, per-account GPUs, elastic running jobs, jobs per class and GPU pools (the backend's index,
``model/index.py``) equal what a snapshot built from scratch shows, and the accounts' usage
(summed when first read) what the eager sum gave."""

from __future__ import annotations

import pytest

from railgang.daemon.core.model.snapshot import make_snapshot
from railgang.daemon.core.model.snapshot import rebuild_index as rebuild
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.backend import SimBackend
from railgang.daemon.sim.engine import simulate
from railgang.daemon.sim.replay import make_elastic
from railgang.topology.fabric import fabric_from_shape
from tests.daemon.sim.schedule_pin import synthetic_jobs


@pytest.mark.parametrize("policy", ["default", "pollux", "tiresias", "fifo"])
def test_shared_views_equal_a_snapshot_from_scratch(policy: str) -> None:
    checked = []

    def check(now: float, backend: SimBackend) -> None:
        snap = backend.snapshot(now)
        fresh = make_snapshot(now=now, fabric=None, nodes=backend.nodes.values(),
                              free={n: g for n, g in backend.free.items()
                                    if backend.nodes[n].state.usable},
                              running=snap.running.values())
        assert dict(snap.free) == dict(fresh.free) and list(snap.free) == sorted(snap.free)
        assert dict(snap.nodes) == dict(fresh.nodes) and snap.total_gpus == fresh.total_gpus
        assert snap.account_running_gpus() == fresh.account_running_gpus()
        assert list(snap.running) == sorted(backend.running)
        assert all(snap.running[j].job.request is sj.request for j, sj in backend.running.items())
        assert snap.index is not None and snap.index == rebuild(snap)  # the backend's own index
        assert snap.elastic_running == fresh.elastic_running
        assert snap.running_per_class == fresh.running_per_class
        assert snap.free_gpus == fresh.free_gpus
        usage = dict(backend._usage_done)  # the eager sum, in the backend's order of its jobs
        for sj in backend.running.values():
            acc = sj.tj.account
            usage[acc] = usage.get(acc, 0.0) + sj.attained_at(now) - sj.attained_at_start
        assert {a.name: a.usage_gpu_s for a in snap.accounts.values()} == usage
        assert list(snap.accounts) == sorted(usage)
        checked.append(now)

    run = simulate(make_elastic(synthetic_jobs()[:120]), get(policy), fabric_from_shape(8, 8, 4),
                   observer=check)
    assert checked and run.metrics.finished > 0
    assert sum(r.preemptions + r.resizes for r in run.records) > 0  # the views did change
