"""``SimBackend``: the simulated cluster behind the backend seam.

It holds what a real Slurm cluster would hold — which GPUs are busy, which jobs run where and how
far they are — builds the immutable ``Snapshot`` the decision core reads, and applies the core's
actions exactly as ordered: ``Start`` occupies exactly the placement's GPUs, ``Resize`` swaps the
assignment and pays the job's transition time, ``Preempt`` signals and kills after the grace time
(work since the last checkpoint is lost and the restart pays the restore time), ``DrainNode``
keeps a node's free GPUs out of every later snapshot.

Time only enters as the ``now`` argument. Future events the simulation must wake up for (a job's
completion, the end of a preemption grace period) are handed to an ``EventSink`` — the
discrete-event engine in ``daemon/sim/engine.py``; the backend never advances time itself.
Progress is integrated lazily, per job, from its last update to ``now`` (O(1) per job touched).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from railgang.daemon.core.actions import (
    Action,
    DrainNode,
    Preempt,
    Resize,
    SetPriority,
    Start,
    TagNode,
)
from railgang.daemon.core.job import Job, RunningJob
from railgang.daemon.core.snapshot import Account, Node, PreemptEvent, Snapshot
from railgang.daemon.sim.metrics import JobRecord
from railgang.daemon.sim.progress import CommModel, NoComm, core_job
from railgang.daemon.sim.traces.model import TraceJob
from railgang.daemon.slurm.backend import ActionResult

COMPLETE = "complete"
KILL = "kill"
_EPS = 1e-6


class EventSink(Protocol):
    def at(self, time: float, kind: str, job_id: str, version: int) -> None:
        """Wake the simulation at ``time`` for ``job_id`` (stale if ``version`` has moved on)."""
        ...


class _NoEvents:
    def at(self, time: float, kind: str, job_id: str, version: int) -> None:
        return None


@dataclass(frozen=True, slots=True)
class SimConfig:
    comm_share: float = 0.2  # all-reduce share of a step, multi-node jobs (progress.py)
    checkpoint_interval_s: float = 1800.0
    checkpoint_cost_s: float = 60.0
    restore_cost_s: float = 120.0  # reload + warm-up after a restart
    transition_cost_s: float = 30.0  # no progress for this long after a resize
    panic_checkpoint: bool = False  # a signalled job saves if grace >= checkpoint cost
    preempt_window_s: float = 3600.0  # how much preemption history snapshots carry
    oracle: bool = True  # tell the core the exact work left (a real cluster only estimates it)


def _clone(obj: Any, **changes: Any) -> Any:
    """Copy a frozen (non-slots) dataclass with ``changes``, skipping validation (hot path)."""
    new = object.__new__(type(obj))
    fields = obj.__dict__.copy()
    fields.update(changes)
    object.__setattr__(new, "__dict__", fields)
    return new


class _SimJob:
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
        "frozen",
        "gpus",
        "job",
        "kill_at",
        "last_preempted_at",
        "last_resize_time",
        "preemptions",
        "qkey",
        "rate",
        "record",
        "remaining",
        "replicas",
        "restore_needed",
        "run_origin",
        "share",
        "start_time",
        "stopped",
        "submit_integral",
        "tj",
        "version",
        "view",
    )

    def __init__(self, tj: TraceJob, job: Job, integral: float) -> None:
        self.tj = tj
        self.job = job
        self.view: Job = job  # what the core sees while pending (refreshed when it changes)
        self.record = JobRecord(job_id=tj.job_id, account=tj.account, gpus=tj.gpus,
                                submit=tj.submit_time, duration_s=tj.duration_s)
        self.remaining = tj.duration_s
        self.as_of = tj.submit_time
        self.attained = 0.0
        self.attained_at_start = 0.0
        self.assignment: dict[str, tuple[int, ...]] | None = None
        self.frozen: RunningJob | None = None
        self.replicas = 0
        self.gpus = 0
        self.rate = 0.0
        self.share = 1.0  # compute share of a step (productive fraction)
        self.busy_until = 0.0
        self.start_time = 0.0
        self.run_origin = 0.0
        self.stopped = False
        self.ckpt_time = 0.0
        self.ckpt_remaining = tj.duration_s
        self.ckpt_productive = 0.0
        self.ckpt_allocated = 0.0
        self.kill_at: float | None = None
        self.last_preempted_at: float | None = None
        self.last_resize_time: float | None = None
        self.preemptions = 0
        self.restore_needed = False
        self.version = 0
        self.submit_integral = integral
        self.qkey: tuple[float, int, str] = (tj.submit_time, 0, tj.job_id)


class SimBackend:
    """A simulated cluster on a ``topology`` fabric (see the module docstring)."""

    def __init__(self, fabric: Any, *, config: SimConfig = SimConfig(),
                 comm: CommModel | None = None, events: EventSink | None = None,
                 max_pending: int | None = None) -> None:
        self.fabric = fabric
        self.config = config
        self.comm = comm or NoComm()
        self.events: EventSink = events if events is not None else _NoEvents()
        self.max_pending = max_pending  # cap on queue length shown to the core (None = all)
        names = tuple(fabric.nodes)
        self.nodes: dict[str, Node] = {n: Node(n, fabric.facts(n).gpus) for n in names}
        self.free: dict[str, set[int]] = {n: set(range(self.nodes[n].gpus)) for n in names}
        self._frozen_free: dict[str, frozenset[int]] = {}
        self.jobs: dict[str, _SimJob] = {}
        self.pending: list[tuple[float, int, str]] = []  # (submit, seq, job_id), kept sorted
        self._pending_jobs: list[Job] = []  # the core's views, aligned with ``pending``
        self._pending_view: tuple[Job, ...] | None = None
        self.running: dict[str, _SimJob] = {}
        self.records: list[JobRecord] = []
        self.preempt_log: list[PreemptEvent] = []
        self.priorities: dict[str, int] = {}
        self._seq = 0
        self._acc_base: dict[str, float] = {}
        self._in_system = 0
        self._integral = 0.0
        self._integral_t = 0.0
        self.finished = 0

    # -- bookkeeping ---------------------------------------------------------------------------
    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes.values() if n.state not in ("drain", "down"))

    def _count(self, now: float, delta: int) -> None:
        if now > self._integral_t:
            self._integral += self._in_system * (now - self._integral_t)
            self._integral_t = now
        self._in_system += delta

    def _integral_at(self, now: float) -> float:
        return self._integral + self._in_system * max(0.0, now - self._integral_t)

    def _enqueue(self, sj: _SimJob) -> None:
        self._seq += 1
        sj.qkey = (sj.tj.submit_time, self._seq, sj.tj.job_id)
        i = bisect.bisect_left(self.pending, sj.qkey)
        self.pending.insert(i, sj.qkey)
        self._pending_jobs.insert(i, sj.view)
        self._pending_view = None

    def _dequeue(self, sj: _SimJob) -> None:
        i = bisect.bisect_left(self.pending, sj.qkey)
        if i < len(self.pending) and self.pending[i] == sj.qkey:
            del self.pending[i]
            del self._pending_jobs[i]
            self._pending_view = None

    def _take(self, assignment: Mapping[str, tuple[int, ...]]) -> str | None:
        for node, gpus in assignment.items():
            have = self.free.get(node)
            if have is None or self.nodes[node].state in ("drain", "down"):
                return f"node {node} is not usable"
            if not have.issuperset(gpus):
                return f"GPUs {sorted(set(gpus) - have)} on {node} are not free"
        for node, gpus in assignment.items():
            self.free[node].difference_update(gpus)
            self._frozen_free.pop(node, None)
        return None

    def _give(self, assignment: Mapping[str, tuple[int, ...]]) -> None:
        for node, gpus in assignment.items():
            self.free[node].update(gpus)
            self._frozen_free.pop(node, None)

    # -- progress ------------------------------------------------------------------------------
    def _advance(self, sj: _SimJob, t: float) -> None:
        """Integrate ``sj`` from its last update to ``t`` (constant rate in between)."""
        if sj.assignment is None or t <= sj.as_of:
            sj.as_of = max(sj.as_of, t)
            return
        rec, gpus = sj.record, sj.gpus
        dt = t - sj.as_of
        rec.allocated_gpu_s += gpus * dt
        sj.attained += gpus * dt
        interval = sj.job.checkpoint_interval_s
        p0 = max(sj.as_of, sj.busy_until)
        moving = not sj.stopped and sj.rate > 0
        if moving and interval > 0 and t >= sj.run_origin:
            b = sj.run_origin + math.floor((t - sj.run_origin) / interval) * interval
            if b > sj.as_of:  # a periodic checkpoint was written at b
                done = sj.rate * max(0.0, b - p0)
                sj.ckpt_remaining = sj.remaining - done
                sj.ckpt_productive = rec.productive_gpu_s + gpus * max(0.0, b - p0) * sj.share
                sj.ckpt_allocated = rec.allocated_gpu_s - gpus * (t - b)
                sj.ckpt_time = b
        if moving and t > p0:
            sj.remaining = max(0.0, sj.remaining - sj.rate * (t - p0))
            rec.productive_gpu_s += gpus * (t - p0) * sj.share
        sj.as_of = t

    def _schedule_completion(self, sj: _SimJob, now: float) -> None:
        sj.version += 1
        if sj.stopped or sj.rate <= 0:
            return
        done = max(now, sj.busy_until) + sj.remaining / sj.rate
        self.events.at(done, COMPLETE, sj.tj.job_id, sj.version)

    def _set_allocation(self, sj: _SimJob, assignment: Mapping[str, tuple[int, ...]],
                        replicas: int) -> None:
        sj.assignment = {n: tuple(sorted(g)) for n, g in assignment.items() if g}
        sj.replicas = replicas
        sj.gpus = sum(len(g) for g in sj.assignment.values())
        factor = self.comm.factor(sj.job, sj.assignment)
        sj.rate = sj.job.rate(replicas) * factor
        sj.share = (1.0 - sj.job.comm_fraction) * factor
        sj.frozen = None

    # -- the seam ------------------------------------------------------------------------------
    def submit(self, tj: TraceJob, now: float) -> bool:
        """A job arrives. Returns False (and records a rejection) if it can never fit."""
        cfg = self.config
        job = core_job(tj, comm_share=cfg.comm_share,
                       checkpoint_interval_s=cfg.checkpoint_interval_s,
                       checkpoint_cost_s=cfg.checkpoint_cost_s, restore_cost_s=cfg.restore_cost_s,
                       transition_cost_s=cfg.transition_cost_s)
        if not cfg.oracle:
            job = _clone(job, work_remaining_s=None)
        sj = _SimJob(tj, job, self._integral_at(now))
        self.records.append(sj.record)
        if job.min_gpus > self.total_gpus:
            sj.record.rejected = (f"needs {job.min_gpus} GPUs, the cluster has "
                                  f"{self.total_gpus}")
            return False
        self.jobs[tj.job_id] = sj
        self._count(now, +1)
        self._enqueue(sj)
        return True

    def reject(self, job_id: str, reason: str, now: float) -> None:
        sj = self.jobs.get(job_id)
        if sj is None or sj.assignment is not None:
            return
        del self.jobs[job_id]
        self._dequeue(sj)
        sj.record.rejected = reason
        self._count(now, -1)

    def snapshot(self, now: float) -> Snapshot:
        running: dict[str, RunningJob] = {}
        usage = dict(self._acc_base)
        oracle = self.config.oracle
        new = object.__new__
        for jid, sj in self.running.items():
            # hot path (every running job, every cycle): read progress as of `now` without
            # integrating it (no state changes), and copy the frozen views field-wise
            attained = sj.attained + sj.gpus * max(0.0, now - sj.as_of)
            remaining = sj.remaining
            if not sj.stopped:
                moving_since = sj.as_of if sj.as_of > sj.busy_until else sj.busy_until
                if now > moving_since:
                    remaining = max(0.0, remaining - sj.rate * (now - moving_since))
            fields = sj.job.__dict__.copy()
            fields["attained_gpu_s"] = attained
            fields["work_remaining_s"] = remaining if oracle else None
            fields["last_preempted_at"] = sj.last_preempted_at
            fields["preemptions"] = sj.preemptions
            view = new(Job)
            object.__setattr__(view, "__dict__", fields)
            frozen = sj.frozen
            if frozen is None:
                frozen = sj.frozen = RunningJob(
                    job=view, assignment=sj.assignment or {}, start_time=sj.start_time,
                    replicas=sj.replicas, last_resize_time=sj.last_resize_time,
                    preempt_deadline=sj.kill_at, last_checkpoint_time=sj.ckpt_time)
            rfields = frozen.__dict__.copy()
            rfields["job"] = view
            rfields["last_checkpoint_time"] = sj.ckpt_time
            rj = new(RunningJob)
            object.__setattr__(rj, "__dict__", rfields)
            running[jid] = rj
            acc = sj.tj.account
            usage[acc] = usage.get(acc, 0.0) + attained - sj.attained_at_start
        if self._pending_view is None:
            self._pending_view = tuple(self._pending_jobs)
        pending = self._pending_view
        if self.max_pending is not None and len(pending) > self.max_pending:
            pending = pending[: self.max_pending]
        free: dict[str, frozenset[int]] = {}
        for node, gpus in self.free.items():
            if self.nodes[node].state in ("drain", "down"):
                continue
            cached = self._frozen_free.get(node)
            if cached is None:
                cached = self._frozen_free[node] = frozenset(gpus)
            free[node] = cached
        horizon = now - self.config.preempt_window_s
        while self.preempt_log and self.preempt_log[0].time < horizon:
            self.preempt_log.pop(0)
        accounts = [Account(a, usage_gpu_s=u) for a, u in sorted(usage.items())]
        return Snapshot(now=now, fabric=self.fabric, nodes=self.nodes, free=free,
                        running=running, pending=pending,
                        accounts={a.name: a for a in accounts},
                        preemptions=tuple(self.preempt_log))

    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        results = []
        for action in actions:
            detail = self._apply_one(action, now)
            results.append(ActionResult(action, detail is None, detail or ""))
        return results

    def _apply_one(self, action: Action, now: float) -> str | None:
        if isinstance(action, Start):
            return self._start(action, now)
        if isinstance(action, Resize):
            return self._resize(action, now)
        if isinstance(action, Preempt):
            return self._preempt(action, now)
        if isinstance(action, SetPriority):
            self.priorities[action.job_id] = action.priority
            return None
        if isinstance(action, DrainNode):
            node = self.nodes.get(action.node)
            if node is None:
                return f"unknown node {action.node}"
            self.nodes[action.node] = Node(node.name, node.gpus, "drain", node.tags)
            return None
        if isinstance(action, TagNode):
            node = self.nodes.get(action.node)
            if node is None:
                return f"unknown node {action.node}"
            self.nodes[action.node] = Node(node.name, node.gpus, node.state,
                                           node.tags | {action.tag})
            return None
        return f"unsupported action {type(action).__name__}"

    def _start(self, action: Start, now: float) -> str | None:
        sj = self.jobs.get(action.job_id)
        if sj is None or sj.assignment is not None:
            return f"{action.job_id} is not pending"
        job = sj.job
        if action.gpus != action.replicas * job.replica_gpus:
            return f"{action.gpus} GPUs for {action.replicas} replicas of {job.replica_gpus}"
        if not job.min_replicas <= action.replicas <= job.max_replicas:
            return f"{action.replicas} replicas outside [{job.min_replicas}, {job.max_replicas}]"
        problem = self._take(action.assignment)
        if problem:
            return problem
        self._dequeue(sj)
        sj.as_of = now
        self._set_allocation(sj, action.assignment, action.replicas)
        sj.start_time = now
        sj.busy_until = now
        if sj.restore_needed:
            sj.busy_until = now + job.restore_cost_s
            sj.record.lost_gpu_s += sj.gpus * job.restore_cost_s
        sj.run_origin = sj.busy_until
        sj.stopped = False
        sj.kill_at = None
        sj.last_resize_time = None
        sj.attained_at_start = sj.attained
        # the restored state is the newest checkpoint; restore time is already counted as lost
        sj.ckpt_time = sj.run_origin
        sj.ckpt_remaining = sj.remaining
        sj.ckpt_productive = sj.record.productive_gpu_s
        sj.ckpt_allocated = sj.record.allocated_gpu_s + sj.gpus * (sj.run_origin - now)
        if sj.record.start is None:
            sj.record.start = now
        self.running[sj.tj.job_id] = sj
        self._schedule_completion(sj, now)
        return None

    def _resize(self, action: Resize, now: float) -> str | None:
        sj = self.running.get(action.job_id)
        if sj is None or sj.assignment is None:
            return f"{action.job_id} is not running"
        if sj.kill_at is not None:
            return f"{action.job_id} is being preempted"
        job = sj.job
        if not job.min_replicas <= action.replicas <= job.max_replicas:
            return f"{action.replicas} replicas outside [{job.min_replicas}, {job.max_replicas}]"
        if action.gpus != action.replicas * job.replica_gpus:
            return f"{action.gpus} GPUs for {action.replicas} replicas of {job.replica_gpus}"
        old = sj.assignment
        added = {n: tuple(set(g) - set(old.get(n, ()))) for n, g in action.assignment.items()}
        removed = {n: tuple(set(g) - set(action.assignment.get(n, ()))) for n, g in old.items()}
        problem = self._take({n: g for n, g in added.items() if g})
        if problem:
            return problem
        self._give({n: g for n, g in removed.items() if g})
        self._advance(sj, now)
        self._set_allocation(sj, action.assignment, action.replicas)
        sj.busy_until = max(sj.busy_until, now + job.transition_cost_s)
        sj.last_resize_time = now
        sj.record.resizes += 1
        self._schedule_completion(sj, now)
        return None

    def _preempt(self, action: Preempt, now: float) -> str | None:
        sj = self.running.get(action.job_id)
        if sj is None or sj.assignment is None:
            return f"{action.job_id} is not running"
        if sj.kill_at is not None:
            return None  # already signalled: idempotent
        self._advance(sj, now)
        grace = max(0.0, action.grace_s)
        cost = sj.job.checkpoint_cost_s
        if self.config.panic_checkpoint and grace >= cost:
            # the signal makes the job write a checkpoint now; it exits when that is done
            sj.ckpt_time, sj.ckpt_remaining = now, sj.remaining
            sj.ckpt_productive = sj.record.productive_gpu_s
            sj.ckpt_allocated = sj.record.allocated_gpu_s
            sj.stopped = True
            sj.kill_at = now + cost
        else:
            sj.kill_at = now + grace
        sj.frozen = None
        sj.version += 1  # the completion event (if any) now is stale ...
        if not sj.stopped and sj.rate > 0:
            done = max(now, sj.busy_until) + sj.remaining / sj.rate
            if done <= sj.kill_at:  # ... unless the job finishes within its grace
                self.events.at(done, COMPLETE, sj.tj.job_id, sj.version)
        self.events.at(sj.kill_at, KILL, sj.tj.job_id, sj.version)
        return None

    # -- events from the engine ----------------------------------------------------------------
    def on_event(self, kind: str, job_id: str, version: int, now: float) -> bool:
        """Handle a due event; returns True if the cluster changed (a cycle is worth running)."""
        sj = self.running.get(job_id)
        if sj is None or sj.version != version:
            return False
        if kind == COMPLETE:
            return self._complete(sj, now)
        if kind == KILL:
            self._kill(sj, now)
            return True
        return False

    def _release(self, sj: _SimJob, now: float) -> None:
        assert sj.assignment is not None
        self._give(sj.assignment)
        acc = sj.tj.account
        self._acc_base[acc] = self._acc_base.get(acc, 0.0) + sj.attained - sj.attained_at_start
        sj.assignment = None
        sj.frozen = None
        sj.gpus = 0
        sj.rate = 0.0
        del self.running[sj.tj.job_id]

    def _complete(self, sj: _SimJob, now: float) -> bool:
        self._advance(sj, now)
        if sj.remaining > _EPS * max(1.0, sj.tj.duration_s):
            self._schedule_completion(sj, now)  # rounding: not quite done yet
            return False
        self._release(sj, now)
        del self.jobs[sj.tj.job_id]
        rec = sj.record
        rec.finish = now
        span = now - rec.submit
        rec.mean_jobs_in_system = ((self._integral_at(now) - sj.submit_integral) / span
                                   if span > 0 else 1.0)
        self._count(now, -1)
        self.finished += 1
        return True

    def _kill(self, sj: _SimJob, now: float) -> None:
        self._advance(sj, now)
        rec = sj.record
        rec.preemptions += 1
        rec.lost_gpu_s += max(0.0, rec.allocated_gpu_s - sj.ckpt_allocated)
        rec.productive_gpu_s = sj.ckpt_productive
        sj.remaining = sj.ckpt_remaining
        self.preempt_log.append(PreemptEvent(now, sj.tj.job_id, sj.gpus))
        self._release(sj, now)
        sj.kill_at = None
        sj.stopped = False
        sj.restore_needed = True
        sj.preemptions += 1
        sj.last_preempted_at = now
        sj.version += 1
        sj.view = _clone(sj.job, attained_gpu_s=sj.attained,
                         work_remaining_s=sj.remaining if self.config.oracle else None,
                         last_preempted_at=now, preemptions=sj.preemptions)
        self._enqueue(sj)

    # -- end of run ----------------------------------------------------------------------------
    def pending_ids(self) -> list[str]:
        return [jid for _, _, jid in self.pending]


__all__ = ["COMPLETE", "KILL", "EventSink", "SimBackend", "SimConfig"]
