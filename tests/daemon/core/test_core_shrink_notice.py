"""A shrink with notice (issue 39): the core emits the shrink with its grace and keeps the GPUs
it gives up out of this cycle's starts; a job in its notice is not resized or evicted again."""

from __future__ import annotations

import dataclasses
import random

from railgang.daemon.core import CycleConfig, Decision, Preempt, Reason, Resize, Start, decide
from railgang.daemon.core.model.elastic import ElasticRules
from railgang.daemon.core.model.snapshot import Snapshot
from tests.daemon.core.core_builders import cluster, first_fit, job

NOW = 36000.0


def run(snap: Snapshot, grace: float) -> Decision:
    from railgang.daemon.core.policies.registry import get

    config = CycleConfig(elastic=ElasticRules(shrink_grace_s=grace))
    return decide(snap, get("fifo"), snap.now, random.Random(0), placer=first_fit, config=config)


def _snap() -> Snapshot:
    return (cluster(20).at(NOW).running(*[job(f"p{i}").gpus(8).cls(1) for i in range(18)])
            .running(job("el").gpus(16).tp(8).elastic(1, 2).cls(3), start=0)
            .pending(job("prod").gpus(8).cls(1)).build())


def test_a_noticed_shrink_carries_its_grace_and_its_gpus_serve_no_start_this_cycle() -> None:
    d = run(_snap(), 45.0)
    (r,) = d.of(Resize)
    assert isinstance(r, Resize) and (r.job_id, r.replicas, r.grace_s) == ("el", 1, 45.0)
    assert not d.of(Start) and not d.of(Preempt)
    reason = d.reason("prod")
    assert reason is not None and reason.code is Reason.PREEMPTING
    assert "shrinking el" in reason.detail


def test_without_a_notice_the_shrink_frees_its_gpus_at_once_as_before() -> None:
    d = run(_snap(), 0.0)
    assert [(type(a).__name__, a.job_id) for a in d.actions] == [("Resize", "el"), ("Start", "prod")]
    assert d.of(Resize)[0].grace_s == 0.0  # type: ignore[union-attr]


def test_a_noticed_shrink_does_not_end_the_job_in_the_estimates() -> None:
    el = _snap().running["el"]
    preempted = dataclasses.replace(el, preempt_deadline=NOW + 30)
    noticed = dataclasses.replace(el, preempt_deadline=NOW + 30, shrink_to=1)
    assert preempted.expected_end(NOW) == NOW + 30  # a preemption gives every GPU back then
    assert noticed.expected_end(NOW) == el.expected_end(NOW)  # a shrink runs on, smaller


def test_a_job_in_its_notice_is_neither_shrunk_again_nor_evicted_and_its_gpus_stay_held() -> None:
    snap = _snap()
    el = snap.running["el"]
    noticed = dataclasses.replace(el, preempt_deadline=NOW + 30, shrink_to=1)  # as backends show it
    snap = dataclasses.replace(snap, running={**snap.running, "el": noticed})
    d = run(snap, 45.0)
    assert not d.of(Resize) and not d.of(Preempt) and not d.of(Start)
    reason = d.reason("prod")  # it waits for the GPUs the notice will free
    assert reason is not None and reason.code in (Reason.WAITING_FOR_GPUS, Reason.PREEMPTING)


def test_the_start_time_estimator_keeps_a_noticed_job_running() -> None:
    from railgang.daemon.service.estimate import _until_deadline

    el = _snap().running["el"]
    assert _until_deadline(dataclasses.replace(el, preempt_deadline=NOW + 30), NOW, 500.0) == 30.0
    noticed = dataclasses.replace(el, preempt_deadline=NOW + 30, shrink_to=1)
    assert _until_deadline(noticed, NOW, 500.0) == 500.0
