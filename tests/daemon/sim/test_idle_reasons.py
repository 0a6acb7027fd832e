"""Work conservation: idle GPUs behind a backfill reservation are charged to ``reserved`` even
when the reservation holder's own reason is no longer ``reserved`` at the end of the cycle."""

from __future__ import annotations

import random

import pytest

from railgang.daemon.core import decide
from railgang.daemon.core.model.reasons import PendingReason, Reason
from railgang.daemon.core.policies.registry import get
from railgang.daemon.sim.metrics import JobRecord
from railgang.daemon.sim.recorder import Recorder, _charge_to
from tests.daemon.core.core_builders import cluster, first_fit, job


def _recorder(*ids: str) -> tuple[Recorder, dict[str, JobRecord]]:
    rec = Recorder()
    for i in ids:
        rec.records.append(JobRecord(job_id=i, account="a", gpus=1, submit=0.0, duration_s=1.0))
        rec._by_id[i] = rec.records[-1]  # the records the backend would have made on arrival
    return rec, {r.job_id: r for r in rec.records}


@pytest.mark.parametrize("holder", [Reason.RESERVED, Reason.PREEMPTION_BUDGET, Reason.PREEMPTING],
                         ids=["holder-reserved", "holder-budget", "holder-preempting"])
def test_job_behind_a_reservation_is_charged_reserved_whatever_the_holder_shows(
        holder: Reason) -> None:
    rec, by_id = _recorder("head", "small")
    rec.cycle(0.0, 4, [PendingReason("head", holder, "x", needed=8),
                       PendingReason("small", Reason.PRIORITY, "", needed=2)])
    rec.cycle(100.0, 4, [])
    assert by_id["small"].idle_fit_gpu_s == {"reserved": 200.0}
    assert by_id["head"].idle_fit_gpu_s == {}  # needs 8, 4 free: not idle "for" it


@pytest.mark.parametrize(("detail", "charged"), [
    ("FIFO: behind a", "priority"), ("not ordered by the policy this cycle", "priority"),
    ("borrowing: 4 of 8 free GPUs are held for guaranteed work of t", "priority"), ("", "reserved")],
    ids=["fifo-head", "not-ordered", "quota-borrowing", "backfill"])
def test_priority_kinds(detail: str, charged: str) -> None:
    assert _charge_to(PendingReason("j", Reason.PRIORITY, detail, needed=1)) == charged


@pytest.mark.parametrize(("policy", "charged"), [("slurm", "reserved"), ("fifo", "priority")])
def test_the_core_reasons_classify_as_the_recorder_expects(policy: str, charged: str) -> None:
    # r holds 4 of 8 GPUs; big (8) cannot start; long (2 GPUs, ends long after r) would fit now
    # but under backfill would delay big's reservation, under strict FIFO waits behind big
    snap = (cluster(1).at(100).running(job("r").gpus(4).work(4 * 3600), start=0)
            .pending(job("big").gpus(8).at(10).work(8 * 3600),
                     job("long").gpus(2).at(20).work(100 * 3600)).build())
    d = decide(snap, get(policy), snap.now, random.Random(0), placer=first_fit)
    long = next(r for r in d.reasons if r.job_id == "long")
    assert long.code is Reason.PRIORITY and _charge_to(long) == charged
