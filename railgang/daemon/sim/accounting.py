"""Progress and checkpoint accounting of one simulated job.

A :class:`SimJob` integrates its job's progress lazily, from its last update to a given time, at a
constant rate in between (O(1) per job touched): the rate only changes when the cluster changes
the job (start, resize, preemption), and the backend calls :meth:`SimJob.advance` right before it
does. Periodic checkpoints need no events either: the last one before a time is found
arithmetically, and a kill rolls the job back to it.

Units: work in *seconds at the requested size* (``remaining``), service and waste in GPU-seconds
(written straight into the job's :class:`~railgang.daemon.sim.metrics.JobRecord`).
"""

from __future__ import annotations

import math

from railgang.daemon.core.model.job import (
    Assignment,
    Job,
    JobRequest,
    JobState,
    RunningJob,
    gpu_count,
)
from railgang.daemon.sim.metrics import JobRecord
from railgang.daemon.sim.traces.model import TraceJob
from railgang.daemon.sim.views import LiveRunning

DONE_EPS = 1e-6  # relative work left below which a job counts as finished (float rounding)


class SimJob:
    """One job in the simulated cluster: its request, how far it got, what it holds."""

    __slots__ = (
        "as_of",
        "assignment",
        "attained",
        "attained_at_start",
        "busy_until",
        "ckpt_allocated",
        "ckpt_productive",
        "ckpt_remaining",
        "ckpt_time",
        "eff",
        "gpus",
        "job",
        "kill_at",
        "last_resize_time",
        "notice_until",
        "pool",
        "price_s",
        "qkey",
        "rate",
        "record",
        "remaining",
        "replicas",
        "restore_needed",
        "run_origin",
        "share",
        "shrink_to",
        "stale",
        "start_time",
        "stopped",
        "submit_integral",
        "tj",
        "version",
        "view",
    )

    def __init__(self, tj: TraceJob, request: JobRequest, record: JobRecord, *, oracle: bool,
                 integral: float) -> None:
        self.tj = tj
        # what the core sees while the job waits; replaced (state only) after each preemption
        self.job = Job(request, JobState(work_remaining_s=tj.duration_s if oracle else None))
        self.record = record
        self.remaining = tj.duration_s  # work left as of ``as_of``
        self.as_of = tj.submit_time
        self.attained = 0.0  # GPU-seconds held as of ``as_of``, over all runs
        self.attained_at_start = 0.0
        self.assignment: Assignment | None = None  # None while pending
        self.view: RunningJob | None = None  # the core's view, kept until this job changes
        self.stale: set[str] | None = None  # its backend's set of jobs whose view went (if any)
        self.replicas = 0
        self.gpus = 0
        self.rate = 0.0  # work-seconds per second while moving
        self.share = 1.0  # compute share of a step (productive fraction)
        self.eff = 1.0  # service counted per GPU-second: rate on this type / on the fastest type
        self.pool: str | None = None  # "type:tier" held, when capacity is typed or priced
        self.price_s = 0.0  # USD per GPU-second of that pool
        self.busy_until = 0.0  # restoring or resizing until then: no progress
        self.start_time = 0.0
        self.run_origin = 0.0  # periodic checkpoints are counted from here
        self.stopped = False  # signalled and checkpointing: no more progress
        self.ckpt_time = 0.0
        self.ckpt_remaining = tj.duration_s
        self.ckpt_productive = 0.0
        self.ckpt_allocated = 0.0
        self.kill_at: float | None = None
        self.last_resize_time: float | None = None
        self.notice_until: float | None = None  # a shrink's notice ends (notice.py) ...
        self.shrink_to: int | None = None  # ... and the replicas it leaves
        self.restore_needed = False
        self.version = 0  # bumped whenever scheduled events for this job go stale
        self.submit_integral = integral  # jobs-in-system integral when it arrived (for ρ)
        self.qkey: tuple[float, int, str] = (tj.submit_time, 0, tj.job_id)

    @property
    def request(self) -> JobRequest:
        return self.job.request

    def size_problem(self, replicas: int, gpus: int) -> str | None:
        """Why a start or resize at this size does not fit the request (whole replicas, in range)."""
        req = self.request
        if gpus != replicas * req.replica_gpus:
            return f"{gpus} GPUs for {replicas} replicas of {req.replica_gpus}"
        if not req.min_replicas <= replicas <= req.max_replicas:
            return f"{replicas} replicas outside [{req.min_replicas}, {req.max_replicas}]"
        return None

    # -- integration -------------------------------------------------------------------------
    def advance(self, t: float) -> None:
        """Integrate from the last update to ``t`` (constant rate in between)."""
        self.changed()
        if self.assignment is None or t <= self.as_of:
            self.as_of = max(self.as_of, t)
            return
        rec, gpus = self.record, self.gpus
        dt = t - self.as_of
        rec.allocated_gpu_s += gpus * dt
        self.attained += gpus * dt * self.eff
        if self.pool is not None:  # typed or priced capacity: what each pool held, what it cost
            rec.pool_gpu_s[self.pool] = rec.pool_gpu_s.get(self.pool, 0.0) + gpus * dt
            rec.cost_usd += gpus * dt * self.price_s
        interval = self.request.checkpoint_interval_s
        p0 = max(self.as_of, self.busy_until)
        moving = not self.stopped and self.rate > 0
        if moving and interval > 0 and t >= self.run_origin:
            b = self.run_origin + math.floor((t - self.run_origin) / interval) * interval
            if b > self.as_of:  # a periodic checkpoint was written at b
                done = self.rate * max(0.0, b - p0)
                self.ckpt_remaining = self.remaining - done
                self.ckpt_productive = rec.productive_gpu_s + gpus * max(0.0, b - p0) * self.share
                self.ckpt_allocated = rec.allocated_gpu_s - gpus * (t - b)
                self.ckpt_time = b
        if moving and t > p0:
            self.remaining = max(0.0, self.remaining - self.rate * (t - p0))
            rec.productive_gpu_s += gpus * (t - p0) * self.share
        self.as_of = t

    def progress_at(self, now: float) -> tuple[float, float]:
        """(GPU-seconds attained, work left) as of ``now``, read without integrating."""
        attained = self.attained + self.gpus * max(0.0, now - self.as_of) * self.eff
        remaining = self.remaining
        if not self.stopped:
            moving_since = self.as_of if self.as_of > self.busy_until else self.busy_until
            if now > moving_since:
                remaining = max(0.0, remaining - self.rate * (now - moving_since))
        return attained, remaining

    def finish_time(self, now: float) -> float | None:
        """When the job completes at its current rate (``None`` if it does not move)."""
        if self.stopped or self.rate <= 0:
            return None
        return max(now, self.busy_until) + self.remaining / self.rate

    def is_done(self) -> bool:
        return self.remaining <= DONE_EPS * max(1.0, self.tj.duration_s)

    # -- what the cluster does to it -----------------------------------------------------------
    def allocate(self, assignment: Assignment, replicas: int, placement_factor: float,
                 type_rate: float = 1.0) -> None:
        """Run on ``assignment`` from now on (call :meth:`advance` first); ``type_rate`` is the
        job's speed on the GPU type it got (``capacity.Capacity.speed``)."""
        self.assignment = {n: tuple(sorted(g)) for n, g in assignment.items() if g}
        self.replicas = replicas
        self.gpus = gpu_count(self.assignment)
        request = self.request
        self.rate = request.rate(replicas) * placement_factor
        if type_rate != 1.0:
            self.rate *= type_rate
        self.share = (1.0 - request.comm_fraction) * placement_factor
        self.changed()

    def begin_run(self, now: float) -> None:
        """Bookkeeping of a (re)start at ``now`` on the allocation just set."""
        rec = self.record
        self.changed()
        self.as_of = now
        self.start_time = now
        self.busy_until = now
        if self.restore_needed:
            self.busy_until = now + self.request.restore_cost_s
            rec.lost_gpu_s += self.gpus * self.request.restore_cost_s
        self.run_origin = self.busy_until
        self.stopped = False
        self.kill_at = None
        self.last_resize_time = None
        self.attained_at_start = self.attained
        # the restored state is the newest checkpoint; restore time is already counted as lost
        self.ckpt_time = self.run_origin
        self.ckpt_remaining = self.remaining
        self.ckpt_productive = rec.productive_gpu_s
        self.ckpt_allocated = rec.allocated_gpu_s + self.gpus * (self.run_origin - now)
        if rec.start is None:
            rec.start = now

    def resized(self, now: float) -> None:
        """A resize just took effect: no progress during the transition."""
        self.busy_until = max(self.busy_until, now + self.request.transition_cost_s)
        self.changed()
        self.last_resize_time = now
        self.record.resizes += 1

    def signal(self, now: float, grace_s: float, panic_checkpoint: bool) -> float:
        """Preemption signal at ``now``; returns when the job is killed. With a panic checkpoint
        the job saves now (if the grace allows) and exits when the save is done."""
        self.advance(now)
        cost = self.request.checkpoint_cost_s
        if panic_checkpoint and grace_s >= cost:
            self.ckpt_time, self.ckpt_remaining = now, self.remaining
            self.ckpt_productive = self.record.productive_gpu_s
            self.ckpt_allocated = self.record.allocated_gpu_s
            self.stopped = True
            self.kill_at = now + cost
        else:
            self.kill_at = now + grace_s
        self.changed()
        self.version += 1
        return self.kill_at

    def roll_back(self, now: float) -> None:
        """Killed at ``now``: work since the last checkpoint is lost (call :meth:`advance` first;
        the backend releases the GPUs)."""
        rec = self.record
        self.changed()
        rec.preemptions += 1
        rec.lost_gpu_s += max(0.0, rec.allocated_gpu_s - self.ckpt_allocated)
        rec.productive_gpu_s = self.ckpt_productive
        self.remaining = self.ckpt_remaining
        self.kill_at = None
        self.stopped = False
        self.restore_needed = True
        self.version += 1

    def released(self) -> None:
        self.assignment = None
        self.changed()
        self.gpus = 0
        self.rate = 0.0

    # -- what the decision core sees -------------------------------------------------------------
    def changed(self) -> None:
        """This job changed: its view is built again when next shown, and its backend's
        snapshot re-reads only the views that went (``SimBackend.snapshot``)."""
        self.view = None
        if self.stale is not None:
            self.stale.add(self.tj.job_id)

    def running_view(self, oracle: bool) -> RunningJob:
        """The core's view of this running job: built once per change of the job and kept until
        the next; it answers for any time the core asks (``views.LiveRunning``)."""
        view = self.view
        if view is not None:
            return view
        assert self.assignment is not None
        # the progress line, copied: a later change of this job builds a new view, and one
        # already handed out keeps reading the line it was built with
        line = (self.job.state, self.attained, self.as_of, self.gpus, self.eff,
                self.remaining if oracle else None, None if self.stopped else self.busy_until,
                self.rate, self.attained_at_start)
        base = RunningJob(job=self.job, assignment=self.assignment, start_time=self.start_time,
                          replicas=self.replicas, last_resize_time=self.last_resize_time,
                          preempt_deadline=self.kill_at if self.kill_at is not None else self.notice_until,
                          last_checkpoint_time=self.ckpt_time,
                          shrink_to=self.shrink_to if self.kill_at is None else None)
        view = self.view = LiveRunning.of(base, line)
        return view

    def attained_at(self, now: float) -> float:
        """GPU-seconds attained as of ``now`` (:meth:`progress_at`'s arithmetic, same floats)."""
        dt = now - self.as_of
        return self.attained + self.gpus * (dt if dt > 0.0 else 0.0) * self.eff

    def requeued(self, now: float, oracle: bool) -> None:
        """Back in the queue after a kill at ``now``: the pending view gets the new state."""
        self.changed()
        old = self.job.state
        self.job = self.job.with_state(JobState(
            attained_gpu_s=self.attained, work_remaining_s=self.remaining if oracle else None,
            preemptions=old.preemptions + 1, last_preempted_at=now))


__all__ = ["DONE_EPS", "SimJob"]
