"""A cycle's reasons built when read (``phases/waiting.py``): the same reasons, in the queue's
order, as the tuple they stand for; the query for one code skips the jobs recorded in bulk."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from railgang.daemon.core import Decision, PendingReason, Reason, decide
from railgang.daemon.core.model.plan import Want
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.phases.waiting import Behind, BulkWaits, CycleReasons, coded
from railgang.daemon.core.policies.registry import get
from tests.daemon.core.core_builders import cluster, first_fit, job


def run(snap: Snapshot, policy: str = "fifo") -> Decision:
    return decide(snap, get(policy), snap.now, random.Random(0), placer=first_fit)


def _queue() -> Snapshot:
    # two nodes of 8: a (8) starts, huge (64) can never run, b (16) heads the strict queue and
    # c, d, e wait behind it, recorded in bulk
    return (cluster(2).pending(job("a").gpus(8).at(1), job("huge").gpus(64).at(2),
                               job("b").gpus(16).at(3), job("c").gpus(4).at(4),
                               job("d").gpus(4).at(5), job("e").gpus(4).at(6)).build())


def test_the_lazy_reasons_equal_their_tuple_in_queue_order() -> None:
    d = run(_queue())
    as_tuple = tuple(d.reasons)
    assert isinstance(d.reasons, CycleReasons)
    assert [r.job_id for r in as_tuple] == ["huge", "b", "c", "d", "e"]
    assert d.reasons == as_tuple and as_tuple == tuple(d.reasons)  # read twice: the same
    assert len(d.reasons) == 5 and bool(d.reasons) and d.reasons[2] == as_tuple[2]
    assert d.reasons[1:3] == as_tuple[1:3] and hash(d.reasons) == hash(as_tuple)
    assert d == run(_queue())  # a decision still equals an equal one
    assert as_tuple[2] == PendingReason("c", Reason.PRIORITY, "FIFO: behind b", 4, 8)


def test_one_code_is_found_without_the_bulk() -> None:
    d = run(_queue())
    assert [r.job_id for r in coded(d.reasons, Reason.LARGER_THAN_CLUSTER)] == ["huge"]
    assert [r.job_id for r in coded(d.reasons, Reason.PRIORITY)] == ["c", "d", "e"]  # bulk code
    plain = tuple(d.reasons)
    assert [r.job_id for r in coded(plain, Reason.PRIORITY)] == ["c", "d", "e"]


def test_several_of_one_code_come_in_queue_order() -> None:
    snap = cluster(1).pending(job("x").gpus(64).at(1), job("y").gpus(32).at(2)).build()
    d = run(snap, "fifo-greedy")
    assert [r.job_id for r in coded(d.reasons, Reason.LARGER_THAN_CLUSTER)] == ["x", "y"]


def test_no_waiting_job_no_reason() -> None:
    d = run(cluster(1).pending(job("a").gpus(8).at(1)).build())
    assert not d.reasons and len(d.reasons) == 0 and d.reasons == ()


_bulk_ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.lists(st.integers(0, 30), max_size=12, unique=True)),
    st.tuples(st.just("pop"), st.integers(0, 30)),
), max_size=25)


@given(_bulk_ops)
@settings(max_examples=200, deadline=None)
def test_bulk_waits_read_as_the_merged_map_they_stand_for(ops: list[tuple[str, object]]) -> None:
    """``BulkWaits`` keeps records apart until a job is taken out or two records share one;
    read any way, it must equal the one map ``dict.update`` would have built (the last record
    wins), and ``count`` is only ever the true size."""
    bulk, model = BulkWaits(), dict[str, Behind]()
    for op, arg in ops:
        if op == "add":
            assert isinstance(arg, list)
            wants = {f"j{k}": Want(f"j{k}", 1, 1) for k in arg}
            b = Behind(wants, {}, Reason.WAITING_FOR_GPUS, f"record {len(model)}", 0)
            bulk.add(b)
            model.update(dict.fromkeys(wants, b))
        else:
            bulk.pop(f"j{arg}")
            model.pop(f"j{arg}", None)
        for k in range(31):
            assert bulk.get(f"j{k}") is model.get(f"j{k}")
            assert (f"j{k}" in bulk) == (f"j{k}" in model)
        n = bulk.count()
        assert n is None or n == len(model)
        assert bool(bulk) == bool(model) and len(bulk) == len(model)
    assert dict(bulk) == model
