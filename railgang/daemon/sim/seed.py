"""Seeding an empty simulated cluster from a snapshot of another: the what-if a start-time
estimate replays forward (``railgang.daemon.service.estimate``). Kept apart from the backend's
cycle-by-cycle code (the backend does not import it); it writes the backend's state as the
backend's own methods would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from railgang.daemon.core.model.fairshare import running_use
from railgang.daemon.core.model.job import Job
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.sim.accounting import SimJob
from railgang.daemon.sim.metrics import JobRecord
from railgang.daemon.sim.traces.model import TraceJob

if TYPE_CHECKING:
    from railgang.daemon.sim.backend import SimBackend


def load(backend: SimBackend, snapshot: Snapshot, run_s: Mapping[str, float]) -> dict[str, JobRecord]:
    """Seed the empty ``backend`` with ``snapshot``, as of ``snapshot.now``.

    Nodes keep their state and free GPUs are the snapshot's, so GPUs held by jobs the snapshot
    does not show (non-railgang jobs) stay held. Each running job keeps its exact GPUs and
    finishes ``run_s[job]`` seconds after ``snapshot.now``; each pending job enters the queue
    in the snapshot's order and runs ``run_s[job]`` seconds at its requested size. Jobs keep
    their requests (class, scaling curve, time limit) and states; accounts keep their shares
    and usage; the preemption history carries over (budgets). Returns the records by job id.
    """
    now = snapshot.now
    for name, node in snapshot.nodes.items():
        if name in backend.nodes:
            backend.nodes[name] = node
    for name in backend.free:
        backend.free[name] = set(snapshot.free.get(name, ()))
    backend._nodes_changed()
    backend._account_base = dict(snapshot.accounts)
    backend._usage_done = {a.name: a.usage_gpu_s for a in snapshot.accounts.values()}
    # the fair-share input of what ended; the running jobs' runs restart here (their own part)
    ran = running_use(snapshot.running.values(), now, backend._recent.half_life_s)
    for a in snapshot.accounts.values():
        backend._recent.seed(a.name, a.recent_gpu_s - ran.get(a.name, 0.0), now)
    backend.preempt_log = list(snapshot.preemptions)
    records: dict[str, JobRecord] = {}
    for job_id, run in snapshot.running.items():
        sj = _seeded(backend, run.job, run_s[job_id], now)
        backend._allocate(sj, run.assignment, run.replicas)
        sj.remaining = run_s[job_id] * sj.rate  # work left, so that it ends run_s from now
        sj.begin_run(now)
        sj.start_time, sj.last_resize_time = run.start_time, run.last_resize_time
        sj.changed()  # fields written after begin_run
        backend._entered(sj)
        backend._schedule_completion(sj, now)
        records[job_id] = sj.record
    for job in snapshot.pending:
        sj = _seeded(backend, job, run_s[job.job_id], now)
        backend._enqueue(sj)
        records[job.job_id] = sj.record
    return records


def _seeded(backend: SimBackend, job: Job, run_s: float, now: float) -> SimJob:
    r = job.request
    tj = TraceJob(job_id=r.job_id, submit_time=r.submit_time, gpus=r.gpus,
                  duration_s=max(run_s, 1.0), account=r.account, tp=r.tp, pp=r.pp,
                  elastic_min=r.elastic_min, elastic_max=r.elastic_max,
                  priority_class=r.priority_class, model=r.model)
    sj = SimJob(tj, r, backend.recorder.record(tj), oracle=False,
                integral=backend.recorder.integral_at(now))
    sj.job, sj.as_of = job, now  # the state as observed (attained service, preemptions)
    sj.attained = sj.attained_at_start = job.attained_gpu_s
    backend.jobs[r.job_id] = sj
    backend.recorder.entered(now)
    return sj


__all__ = ["load"]
