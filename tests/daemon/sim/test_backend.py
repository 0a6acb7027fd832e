from __future__ import annotations

from typing import Any

import pytest

from railgang.daemon.backend import Backend
from railgang.daemon.core.model.actions import DrainNode, Preempt, Resize, SetPriority, Start
from railgang.daemon.sim.backend import COMPLETE, KILL, SimBackend, SimConfig
from railgang.daemon.sim.traces.model import TraceJob
from railgang.topology.fabric import fabric_from_shape


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[float, str, str, int]] = []

    def at(self, time: float, kind: str, job_id: str, version: int) -> None:
        self.events.append((time, kind, job_id, version))

    def last(self, kind: str) -> tuple[float, str, str, int]:
        return [e for e in self.events if e[1] == kind][-1]


def cluster(**cfg: Any) -> tuple[SimBackend, Sink]:
    sink = Sink()
    return SimBackend(fabric_from_shape(2, 8, 2), config=SimConfig(**cfg), events=sink), sink


def job(job_id: str = "j", gpus: int = 8, duration: float = 10_000.0, **kw: Any) -> TraceJob:
    return TraceJob(job_id=job_id, submit_time=0.0, gpus=gpus, duration_s=duration, **kw)


NODE1 = {"n01": tuple(range(8))}


def test_is_a_backend_and_start_occupies_exactly_the_placement() -> None:
    backend, sink = cluster()
    assert isinstance(backend, Backend)
    backend.submit(job(gpus=4), 0.0)
    snap = backend.snapshot(0.0)
    assert [j.job_id for j in snap.pending] == ["j"] and snap.free_gpus == 16
    (res,) = backend.apply([Start("j", {"n02": (1, 3, 5, 7)}, replicas=4)], 0.0)
    assert res.ok
    snap = backend.snapshot(10.0)
    assert snap.free["n02"] == frozenset({0, 2, 4, 6}) and snap.free_gpus == 12
    running = snap.running["j"]
    assert dict(running.assignment) == {"n02": (1, 3, 5, 7)}
    assert running.work_left_at(10.0) == pytest.approx(9990.0)
    assert running.attained_at(10.0) == pytest.approx(40.0)
    assert sink.last(COMPLETE)[0] == pytest.approx(10_000.0)


def test_refused_actions_are_data() -> None:
    backend, _ = cluster()
    backend.submit(job("a"), 0.0)
    backend.submit(job("b"), 0.0)
    ok, clash, wrong_size = backend.apply([
        Start("a", NODE1, replicas=8),
        Start("b", NODE1, replicas=8),
        Start("b", {"n02": (0, 1)}, replicas=8),
    ], 0.0)
    assert ok.ok and not clash.ok and "not free" in clash.detail
    assert not wrong_size.ok
    assert not backend.apply([Preempt("nope", 30.0)], 0.0)[0].ok
    assert backend.apply([SetPriority("b", 7)], 0.0)[0].ok and backend.priorities == {"b": 7}


def test_preemption_loses_work_since_checkpoint_plus_restore() -> None:
    backend, sink = cluster(checkpoint_interval_s=1800.0, restore_cost_s=120.0)
    backend.submit(job(), 0.0)
    backend.apply([Start("j", NODE1, replicas=8)], 0.0)
    backend.apply([Preempt("j", grace_s=30.0)], 2000.0)
    kill_t, _, jid, version = sink.last(KILL)
    assert kill_t == 2030.0
    assert backend.snapshot(2010.0).running["j"].preempt_deadline == 2030.0
    assert backend.on_event(KILL, jid, version, kill_t)
    rec = backend.records[0]
    # checkpoint at 1800: 230 s x 8 GPUs thrown away
    assert rec.preemptions == 1 and rec.lost_gpu_s == pytest.approx(230 * 8)
    snap = backend.snapshot(2030.0)
    (pending,) = snap.pending
    assert pending.work_remaining_s == pytest.approx(10_000 - 1800)
    assert pending.last_preempted_at == 2030.0 and snap.free_gpus == 16
    assert [e.job_id for e in snap.preemptions] == ["j"]
    # restart: restore 120 s with no progress, then the 8200 s left
    backend.apply([Start("j", NODE1, replicas=8)], 3000.0)
    done_t, _, _, version = sink.last(COMPLETE)
    assert done_t == pytest.approx(3000 + 120 + 8200)
    assert backend.on_event(COMPLETE, "j", version, done_t)
    assert rec.finish == pytest.approx(11_320.0)
    assert rec.lost_gpu_s == pytest.approx(230 * 8 + 120 * 8)
    assert rec.allocated_gpu_s == pytest.approx((2030 + 8320) * 8)
    assert rec.productive_gpu_s == pytest.approx(10_000 * 8 * 0.8)  # 20 % communication


def test_panic_checkpoint_within_grace_saves_the_work() -> None:
    backend, sink = cluster(panic_checkpoint=True, checkpoint_cost_s=60.0)
    backend.submit(job(), 0.0)
    backend.apply([Start("j", NODE1, replicas=8)], 0.0)
    backend.apply([Preempt("j", grace_s=300.0)], 2000.0)
    kill_t, _, _, version = sink.last(KILL)
    assert kill_t == 2060.0  # exits once the checkpoint is written
    backend.on_event(KILL, "j", version, kill_t)
    assert backend.snapshot(kill_t).pending[0].work_remaining_s == pytest.approx(8000.0)
    assert backend.records[0].lost_gpu_s == pytest.approx(60 * 8)


def test_a_job_that_finishes_within_its_grace_completes() -> None:
    backend, sink = cluster()
    backend.submit(job(duration=100.0), 0.0)
    backend.apply([Start("j", NODE1, replicas=8)], 0.0)
    backend.apply([Preempt("j", grace_s=60.0)], 90.0)
    t, _, _, version = sink.last(COMPLETE)
    assert t == 100.0 and backend.on_event(COMPLETE, "j", version, t)
    assert not backend.on_event(KILL, "j", version, 150.0)  # stale
    assert backend.records[0].finish == 100.0 and backend.records[0].preemptions == 0


def test_resize_pays_transition_time_and_changes_speed() -> None:
    backend, sink = cluster(transition_cost_s=30.0)
    elastic = job(gpus=8, duration=1000.0, elastic_min=4, elastic_max=16)
    backend.submit(elastic, 0.0)
    backend.apply([Start("j", NODE1, replicas=8)], 0.0)
    grow = {"n01": tuple(range(8)), "n02": tuple(range(8))}
    (res,) = backend.apply([Resize("j", 16, grow, old_replicas=8)], 100.0)
    assert res.ok and backend.snapshot(100.0).free_gpus == 0
    rec = backend.records[0]
    assert rec.resizes == 1
    t, _, _, _ = sink.last(COMPLETE)
    # generic curve: Amdahl s=0.05, rate(16)/rate(8) relative to the requested 8 replicas
    speedup = lambda k: 1 / (0.05 + 0.95 / k)  # noqa: E731
    assert t == pytest.approx(130.0 + 900.0 / (speedup(16) / speedup(8)))
    (shrink,) = backend.apply([Resize("j", 4, {"n02": (0, 1, 2, 3)}, old_replicas=16)], 200.0)
    assert shrink.ok and backend.snapshot(200.0).free_gpus == 12


def test_drain_hides_free_gpus_and_refuses_starts() -> None:
    backend, _ = cluster()
    backend.submit(job(), 0.0)
    assert backend.apply([DrainNode("n01", "lame link")], 0.0)[0].ok
    snap = backend.snapshot(0.0)
    assert "n01" not in snap.free and snap.nodes["n01"].state == "drain"
    assert not backend.apply([Start("j", NODE1, replicas=8)], 0.0)[0].ok


def test_oversize_submission_is_rejected() -> None:
    backend, _ = cluster()
    assert not backend.submit(job(gpus=32), 0.0)
    assert backend.records[0].rejected and backend.snapshot(0.0).pending == ()
