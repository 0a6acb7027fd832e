from __future__ import annotations

import pytest

from railgang.daemon.sim.progress import NoComm, TopologyComm, job_request, speedup_for
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape


def test_measured_throughputs_become_the_scaling_curve() -> None:
    tj = TraceJob("j", 0, 4, 100.0, throughput_by_gpus={1: 10.0, 2: 18.0, 4: 30.0})
    curve = speedup_for(tj)
    assert (curve(1), curve(2), curve(4)) == pytest.approx((1.0, 1.8, 3.0))
    job = job_request(tj)
    assert job.rate(4) == pytest.approx(1.0) and job.rate(2) == pytest.approx(0.6)


def test_generic_curve_is_sublinear_amdahl() -> None:
    curve = speedup_for(TraceJob("j", 0, 8, 100.0))
    assert curve(1) == pytest.approx(1.0)
    assert 1.0 < curve(2) < 2.0 and curve(8) / 8 < curve(2) / 2  # diminishing returns


def test_comm_share_only_for_multi_gpu_jobs() -> None:
    assert job_request(TraceJob("j", 0, 1, 10.0)).comm_fraction == 0.0
    assert job_request(TraceJob("j", 0, 16, 10.0), comm_share=0.3).comm_fraction == 0.3


def test_placement_factor_from_the_topology_comm_model() -> None:
    fabric = fabric_from_shape(16, 8, 4)
    comm = TopologyComm(fabric)
    job = job_request(TraceJob("j", 0, 16, 100.0))
    same_leaf = {"n01": tuple(range(8)), "n02": tuple(range(8))}
    across = {"n01": tuple(range(8)), "n16": tuple(range(8))}
    scattered = {"n01": (0, 1, 2, 3), "n05": (4, 5, 6, 7), "n09": (0, 1, 2, 3),
                 "n13": (4, 5, 6, 7)}
    assert comm.factor(job, same_leaf) == pytest.approx(1.0)
    assert 0.2 < comm.factor(job, scattered) < comm.factor(job, across) < 1.0
    single = job_request(TraceJob("s", 0, 8, 100.0))
    assert comm.factor(single, {"n03": tuple(range(8))}) == 1.0
    assert NoComm().factor(job, scattered) == 1.0


def test_a_placement_priced_again_under_the_same_health_only() -> None:
    """The all-reduce times TopologyComm keeps are those of one link health: a lame spine
    (the backend sets a new LinkHealth) prices the same placement again, and lifting it gives
    back the healthy factor."""
    from railgang.topology.health import LinkHealth

    fabric = fabric_from_shape(16, 8, 4)
    comm = TopologyComm(fabric)
    job = job_request(TraceJob("j", 0, 16, 100.0))
    across = {"n01": tuple(range(8)), "n16": tuple(range(8))}
    healthy = comm.factor(job, across)
    assert comm.factor(job, across) == healthy  # kept
    spine = fabric.parent(fabric.leaf_of("n01"))
    assert spine is not None
    comm.health = LinkHealth(switches={spine: 0.25})
    lame = comm.factor(job, across)
    assert lame < healthy
    assert lame == TopologyComm(fabric, health=comm.health).factor(job, across)  # as if fresh
    comm.health = None
    assert comm.factor(job, across) == healthy
