"""Jobs as the decision core sees them: what was asked for, what it has received, where it runs.

Three values, one idea each (STYLE 16):

- :class:`JobRequest` — what the user asked for (size, shape, elasticity, class, account, needs,
  scaling curve, costs). Immutable and built once per job; every snapshot shares the same object.
- :class:`JobState` — what has happened to it so far (attained service, remaining work,
  preemptions). Small and immutable: a new snapshot builds a new one, never copies the request.
- :class:`Job` — the pair the core reads. It forwards the request's and the state's fields, so
  policies write ``job.gpus`` and ``job.attained_gpu_s``; :meth:`Job.with_state` is the one way to
  move a job forward in time.

:class:`RunningJob` adds where a started job runs (its exact :data:`Assignment`) and its resize and
preemption history.

Sizes are in GPUs and in data-parallel (DP) *replicas*: one replica is ``tp × pp`` GPUs and is
atomic (a tensor-parallel group is never split); elasticity only changes the number of replicas,
inside ``[elastic_min, elastic_max]`` (``None`` means rigid at ``gpus // (tp × pp)`` replicas).
Time is in seconds, work in *seconds at the requested size* (``work_remaining_s``; ``None`` means
unknown) and service in GPU-seconds (``attained_gpu_s``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from railgang.daemon.core.model.needs import NO_NEEDS, Needs
from railgang.daemon.core.model.scaling import SpeedupFn, linear

Assignment = Mapping[str, tuple[int, ...]]
"""Exact GPU assignment: node name -> sorted GPU indices on that node (no empty nodes)."""


def freeze_assignment(assignment: Assignment) -> Assignment:
    """A read-only copy with nodes and GPU indices sorted and empty nodes dropped."""
    return MappingProxyType({n: tuple(sorted(g)) for n, g in sorted(assignment.items()) if g})


def gpu_count(assignment: Assignment) -> int:
    """GPUs in an assignment (the one GPU-count helper of the core)."""
    return sum(map(len, assignment.values()))


class PriorityClass(enum.IntEnum):
    """DESIGN R-S7's priority classes, most important first: the cycle serves them in this order
    and a class may preempt only the ones after it (``model/preemption.py``)."""

    SERVING = 0  # inference replicas: never preempted
    PRODUCTION = 1  # preempted only by serving
    INTERACTIVE = 2  # short limit; preempted by serving and production
    BATCH = 3  # the default: preemptible, fills the gaps


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What was asked for: never changes while the job exists."""

    job_id: str
    gpus: int  # requested size (rigid size; for elastic jobs the preferred size)
    account: str = "default"
    submit_time: float = 0.0
    tp: int = 1  # tensor-parallel degree (GPUs in one NVLink group, atomic)
    pp: int = 1  # pipeline-parallel degree
    elastic_min: int | None = None  # minimum DP replicas; None = rigid
    elastic_max: int | None = None  # maximum DP replicas; None = rigid
    priority_class: PriorityClass = PriorityClass.BATCH  # an int 0-3 is taken and converted
    transition_cost_s: float = 30.0  # throughput lost per resize (10-60 s; 600 s with restart)
    checkpoint_interval_s: float = 1800.0
    checkpoint_cost_s: float = 60.0  # time to save a checkpoint (paid on a graceful preempt)
    restore_cost_s: float = 120.0  # reload + warm-up after a restart
    # what every node of the job must offer (daemon/core/model/needs.py): GPU memory, NVLink, type,
    # network, compute capability (R-S10: capabilities, not SKUs); the one home of those needs
    needs: Needs = NO_NEEDS
    speedup_fn: SpeedupFn = field(default=linear, compare=False, repr=False)
    goodput_fn: SpeedupFn | None = field(default=None, compare=False, repr=False)  # measured
    # goodput on k replicas (throughput × statistical efficiency, e.g. from the job's own
    # gradient-noise telemetry); None = Pollux's model from speedup_fn and grad_noise_scale
    time_limit_s: float | None = None  # user's wall-clock limit (Slurm backfill shadow time)
    grad_noise_scale: float | None = None  # Pollux φ (samples); None = unknown, efficiency 1
    batch_per_replica: int = 32  # samples per replica per step (Pollux statistical efficiency)
    comm_fraction: float = 0.0  # share of a step spent in gradient all-reduce at full size
    model: str = ""
    serving: str = ""  # the serving deployment this class-0 job is a replica of ("" = none;
    # model/serving.py: a replica runs only on its deployment's held nodes)
    # measured speed on each GPU type relative to the type its work is counted in (1.0 there),
    # e.g. {"v100": 1.0, "p100": 0.6, "k80": 0.25}; None = unknown (daemon/core/model/pools.py falls
    # back to its type-speed table). Only compared between types: never changes a single-type run
    type_rates: Mapping[str, float] | None = field(default=None, compare=False, repr=False)

    # sizes, derived once from the request in __post_init__ (it is immutable):
    # replica_gpus: GPUs in one DP replica (tp × pp), the atomic unit of growth and shrink;
    # replicas: requested DP degree; min_replicas/max_replicas: the elastic range; elastic: lo < hi;
    # min_gpus/max_gpus: the range in GPUs
    replica_gpus: int = field(init=False, repr=False, compare=False)
    replicas: int = field(init=False, repr=False, compare=False)
    min_replicas: int = field(init=False, repr=False, compare=False)
    max_replicas: int = field(init=False, repr=False, compare=False)
    elastic: bool = field(init=False, repr=False, compare=False)
    min_gpus: int = field(init=False, repr=False, compare=False)
    max_gpus: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"{self.job_id}: gpus must be >= 1")
        if self.tp < 1 or self.pp < 1 or self.gpus % (self.tp * self.pp):
            raise ValueError(f"{self.job_id}: gpus {self.gpus} is not a multiple of tp×pp")
        if not 0 <= self.priority_class <= 3:
            raise ValueError(f"{self.job_id}: priority_class must be 0-3")
        if self.serving and self.priority_class != 0:
            raise ValueError(f"{self.job_id}: a serving replica ({self.serving}) must be class 0")
        if type(self.priority_class) is not PriorityClass:
            object.__setattr__(self, "priority_class", PriorityClass(self.priority_class))
        per = self.tp * self.pp
        reps = self.gpus // per
        lo = self.elastic_min if self.elastic_min is not None else reps
        hi = self.elastic_max if self.elastic_max is not None else reps
        if not 1 <= lo <= hi:
            raise ValueError(f"{self.job_id}: elastic range [{lo}, {hi}] is empty")
        for name, value in (("replica_gpus", per), ("replicas", reps), ("min_replicas", lo),
                            ("max_replicas", hi), ("elastic", lo != hi), ("min_gpus", lo * per),
                            ("max_gpus", hi * per)):
            object.__setattr__(self, name, value)

    def speedup(self, replicas: int) -> float:
        """Throughput on ``replicas`` relative to one replica (the job's ``speedup_fn``)."""
        return self.speedup_fn(replicas) if replicas > 0 else 0.0

    def efficiency(self, replicas: int) -> float:
        """η(k) = speedup(k) / k."""
        return self.speedup(replicas) / replicas if replicas > 0 else 0.0

    def rate(self, replicas: int) -> float:
        """Progress per second on ``replicas``, in units of the requested size (1.0 at ``gpus``)."""
        if replicas == self.replicas:
            return 1.0
        return self.speedup(replicas) / self.speedup(self.replicas)


@dataclass(frozen=True, slots=True)
class JobState:
    """The service a job has received up to one snapshot."""

    attained_gpu_s: float = 0.0  # GPU-seconds received (incl. the current run)
    work_remaining_s: float | None = None  # seconds left at the requested size; None = unknown
    preemptions: int = 0
    last_preempted_at: float | None = None  # for budgets and cascade damping
    # requeued because a node under it failed (issue 20, docs/failures.md): ordered first in its
    # priority class until it runs again, the way Slurm 25.11's --requeue=expedite does
    after_fault: bool = False


NO_SERVICE = JobState()
"""The state of a job nothing has happened to yet (shared: states are immutable)."""


@dataclass(frozen=True, slots=True)
class Job:
    """A request and its state as of one snapshot; read as one job (fields are forwarded)."""

    request: JobRequest
    state: JobState = NO_SERVICE

    def with_state(self, state: JobState) -> Job:
        """The same request with newer service state (the request object is shared, not copied)."""
        return Job(self.request, state)

    # -- the request (forwarded: policies read ``job.gpus``, not ``job.request.gpus``) ---------
    @property
    def job_id(self) -> str: return self.request.job_id
    @property
    def gpus(self) -> int: return self.request.gpus
    @property
    def account(self) -> str: return self.request.account
    @property
    def submit_time(self) -> float: return self.request.submit_time
    @property
    def elastic_min(self) -> int | None: return self.request.elastic_min
    @property
    def elastic_max(self) -> int | None: return self.request.elastic_max
    @property
    def tp(self) -> int: return self.request.tp
    @property
    def pp(self) -> int: return self.request.pp
    @property
    def priority_class(self) -> PriorityClass: return self.request.priority_class
    @property
    def transition_cost_s(self) -> float: return self.request.transition_cost_s
    @property
    def checkpoint_interval_s(self) -> float: return self.request.checkpoint_interval_s
    @property
    def checkpoint_cost_s(self) -> float: return self.request.checkpoint_cost_s
    @property
    def restore_cost_s(self) -> float: return self.request.restore_cost_s
    @property
    def needs(self) -> Needs: return self.request.needs
    @property
    def speedup_fn(self) -> SpeedupFn: return self.request.speedup_fn
    @property
    def goodput_fn(self) -> SpeedupFn | None: return self.request.goodput_fn
    @property
    def time_limit_s(self) -> float | None: return self.request.time_limit_s
    @property
    def grad_noise_scale(self) -> float | None: return self.request.grad_noise_scale
    @property
    def batch_per_replica(self) -> int: return self.request.batch_per_replica
    @property
    def comm_fraction(self) -> float: return self.request.comm_fraction
    @property
    def model(self) -> str: return self.request.model
    @property
    def type_rates(self) -> Mapping[str, float] | None: return self.request.type_rates
    @property
    def replica_gpus(self) -> int: return self.request.replica_gpus
    @property
    def replicas(self) -> int: return self.request.replicas
    @property
    def min_replicas(self) -> int: return self.request.min_replicas
    @property
    def max_replicas(self) -> int: return self.request.max_replicas
    @property
    def elastic(self) -> bool: return self.request.elastic
    @property
    def min_gpus(self) -> int: return self.request.min_gpus
    @property
    def max_gpus(self) -> int: return self.request.max_gpus

    def speedup(self, replicas: int) -> float:
        return self.request.speedup(replicas)

    def efficiency(self, replicas: int) -> float:
        return self.request.efficiency(replicas)

    def rate(self, replicas: int) -> float:
        return self.request.rate(replicas)

    # -- the state ---------------------------------------------------------------------------
    @property
    def attained_gpu_s(self) -> float: return self.state.attained_gpu_s
    @property
    def work_remaining_s(self) -> float | None: return self.state.work_remaining_s
    @property
    def preemptions(self) -> int: return self.state.preemptions
    @property
    def last_preempted_at(self) -> float | None: return self.state.last_preempted_at

    def remaining_at(self, replicas: int) -> float | None:
        """Seconds to finish on ``replicas`` (``None`` when the work left is unknown)."""
        work = self.state.work_remaining_s
        if work is None:
            return None
        r = self.request.rate(replicas)
        return work / r if r > 0 else float("inf")


@dataclass(frozen=True)
class RunningJob:
    """A started job: its exact assignment and resize/preemption history (immutable).

    Not ``slots``, on purpose: a renewed view (:meth:`with_job`, and the simulator's running
    views whose job state is computed on first read) shares the validated, derived fields of
    the view it renews (its ``__dict__``). The fields are never written after ``__init__``
    (frozen), so the shared dict is as immutable as the object.
    """

    job: Job
    assignment: Assignment  # node -> GPU indices
    start_time: float
    replicas: int  # current DP degree
    last_resize_time: float | None = None
    preempt_deadline: float | None = None  # set while a Preempt is in flight (signal sent), or a
    # shrink's notice (then shrink_to is set): the job is not resized, moved or evicted meanwhile
    last_checkpoint_time: float | None = None
    shrink_to: int | None = None  # replicas after the shrink whose notice is in flight

    gpus: int = field(init=False, repr=False, compare=False)  # GPUs held (derived)
    job_id: str = field(init=False, repr=False, compare=False)  # = job.job_id
    priority_class: PriorityClass = field(init=False, repr=False, compare=False)  # = job.priority_class

    def __post_init__(self) -> None:
        frozen = freeze_assignment(self.assignment)
        object.__setattr__(self, "assignment", frozen)
        object.__setattr__(self, "gpus", gpu_count(frozen))
        object.__setattr__(self, "job_id", self.job.request.job_id)
        object.__setattr__(self, "priority_class", self.job.request.priority_class)

    def with_job(self, job: Job) -> RunningJob:
        """The same run as of a newer snapshot of its job (``job`` must be the same request).

        Every field but ``job`` is taken over as it is, already validated and derived: the
        assignment and GPU count belong to the run, not to the newer snapshot of its job.
        """
        new = object.__new__(RunningJob)
        fields = dict(self.__dict__)
        fields["job"] = job
        object.__setattr__(new, "__dict__", fields)
        return new

    # -- progress: asked as of a time, never read from a clock inside the value (issue 22). A
    # view a backend builds for one snapshot knows its job's progress as of that snapshot's time,
    # the only time the core asks; the simulator's views (sim/views.py) answer for any time
    def attained_at(self, now: float) -> float:
        """GPU-seconds the job has received up to ``now`` (this run included)."""
        return self.job.state.attained_gpu_s

    def work_left_at(self, now: float) -> float | None:
        """Seconds of work left at the requested size as of ``now`` (None: unknown)."""
        return self.job.state.work_remaining_s

    def remaining_at(self, now: float) -> float | None:
        """Seconds to finish from ``now`` at its current size (None: work left unknown)."""
        work = self.work_left_at(now)
        if work is None:
            return None
        r = self.job.request.rate(self.replicas)
        return work / r if r > 0 else float("inf")

    def expected_end(self, now: float) -> float:
        """Best estimate of when the GPUs come back: the preemption deadline if signalled, else
        the work left, else the time limit, else never."""
        left = self.remaining_at(now)
        if left is not None:
            end = now + left
        elif self.job.time_limit_s is not None:
            end = max(now, self.start_time + self.job.time_limit_s)
        else:
            end = float("inf")
        if self.preempt_deadline is None or self.shrink_to is not None:  # a shrink keeps it running
            return end
        return min(end, max(now, self.preempt_deadline))

    def work_since_checkpoint_s(self, now: float) -> float:
        """Wall-clock seconds of progress a preemption now would lose."""
        last = self.last_checkpoint_time if self.last_checkpoint_time is not None else self.start_time
        since = max(0.0, now - last)
        interval = self.job.checkpoint_interval_s
        return since % interval if interval > 0 else since


__all__ = ["NO_SERVICE", "Assignment", "Job", "JobRequest", "JobState", "RunningJob",
           "freeze_assignment", "gpu_count"]
