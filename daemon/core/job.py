"""Jobs as the decision core sees them: what was asked for, and what is running where.

A :class:`Job` is immutable. Sizes are in GPUs and in data-parallel (DP) *replicas*: one replica is
``tp × pp`` GPUs and is atomic (a tensor-parallel group is never split); elasticity only changes
the number of replicas, inside ``[elastic_min, elastic_max]`` (``None`` means rigid at
``gpus // (tp × pp)`` replicas).

The scaling curve enters as a callable (STYLE 6): ``speedup_fn(k)`` is the throughput on ``k``
replicas in units of the throughput of one replica, so the scaling efficiency is
``η(k) = speedup_fn(k) / k``. Helpers build common curves: :func:`linear`, :func:`amdahl` and
:func:`table` (piecewise-linear through measured points).

Time is in seconds, work in *seconds at the requested size* (``work_remaining_s``; the simulator
fills it, ``None`` means unknown) and service in GPU-seconds (``attained_gpu_s``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

SpeedupFn = Callable[[int], float]
"""``speedup_fn(k)``: throughput on ``k`` DP replicas relative to one replica (1.0 at k=1)."""

Assignment = Mapping[str, tuple[int, ...]]
"""Exact GPU assignment: node name -> sorted GPU indices on that node."""


def linear(k: int) -> float:
    """Perfect scaling: speedup(k) = k, η(k) = 1."""
    return float(k)


@dataclass(frozen=True)
class amdahl:  # lower case: reads as a function, amdahl(0.05)
    """Amdahl scaling: speedup(k) = 1 / (s + (1 − s)/k) for serial (communication) fraction s."""

    serial: float  # s: share of a one-replica step that does not parallelise

    def __call__(self, k: int) -> float:
        if k <= 0:
            return 0.0
        return 1.0 / (self.serial + (1.0 - self.serial) / k)


@dataclass(frozen=True)
class allreduce:  # lower case: reads as a function, allreduce(0.1)
    """Compute + ring all-reduce throughput model: step(k) = compute + comm · 2(k − 1)/k.

    ``comm`` is the all-reduce time of a large ring relative to one replica's compute time, so
    speedup(k) = k · (1 + 0) / (1 + comm · 2(k − 1)/k): linear for small ``comm``, sub-linear then
    saturating as communication dominates (the three regimes of the seed's η(k)).
    """

    comm: float  # all-reduce seconds per compute second (the communication term)

    def __call__(self, k: int) -> float:
        if k <= 0:
            return 0.0
        return k / (1.0 + self.comm * 2.0 * (k - 1) / k)


@dataclass(frozen=True)
class table:  # lower case: reads as a function
    """Piecewise-linear speedup through measured points ``{replicas: speedup}``; flat past the last.

    Example from the seed: 128 GPUs = 1 epoch/h, 256 = 1.8, 512 = 3.2 → ``table({1: 1.0, 2: 1.8,
    4: 3.2})`` with one replica = 128 GPUs.
    """

    points: tuple[tuple[int, float], ...]
    xs: tuple[int, ...] = field(repr=False, compare=False)

    def __init__(self, points: Mapping[int, float]) -> None:
        pts = tuple(sorted((int(k), float(v)) for k, v in points.items()))
        if not pts or pts[0][0] < 1:
            raise ValueError("table() needs points with replicas >= 1")
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "xs", tuple(p[0] for p in pts))

    def __call__(self, k: int) -> float:
        if k <= 0:
            return 0.0
        xs = self.xs
        i = bisect.bisect_left(xs, k)
        if i < len(xs) and xs[i] == k:
            return self.points[i][1]
        if i == 0:  # below the first point: scale linearly from zero
            return self.points[0][1] * k / xs[0]
        if i == len(xs):  # saturated past the last measured point
            return self.points[-1][1]
        (x0, y0), (x1, y1) = self.points[i - 1], self.points[i]
        return y0 + (y1 - y0) * (k - x0) / (x1 - x0)


@dataclass(frozen=True)
class Job:
    """A job as submitted plus the service it has received so far (immutable)."""

    job_id: str
    gpus: int  # requested size (rigid size; for elastic jobs the preferred size)
    account: str = "default"
    submit_time: float = 0.0
    tp: int = 1  # tensor-parallel degree (GPUs in one NVLink group, atomic)
    pp: int = 1  # pipeline-parallel degree
    elastic_min: int | None = None  # minimum DP replicas; None = rigid
    elastic_max: int | None = None  # maximum DP replicas; None = rigid
    priority_class: int = 3  # 0 serving, 1 production, 2 interactive, 3 batch (DESIGN R-S7)
    transition_cost_s: float = 30.0  # throughput lost per resize (10-60 s; 600 s with restart)
    checkpoint_interval_s: float = 1800.0
    checkpoint_cost_s: float = 60.0  # time to save a checkpoint (paid on a graceful preempt)
    restore_cost_s: float = 120.0  # reload + warm-up after a restart
    min_gpu_mem_gb: float = 0.0  # capability need (R-S10), not a SKU
    needs_nvlink: bool = False
    speedup_fn: SpeedupFn = field(default=linear, compare=False, repr=False)
    goodput_fn: SpeedupFn | None = field(default=None, compare=False, repr=False)  # measured
    # goodput on k replicas (throughput × statistical efficiency, e.g. from the job's own
    # gradient-noise telemetry); None = Pollux's model from speedup_fn and grad_noise_scale
    attained_gpu_s: float = 0.0  # GPU-seconds received up to the snapshot (incl. the current run)
    work_remaining_s: float | None = None  # seconds left at the requested size; None = unknown
    time_limit_s: float | None = None  # user's wall-clock limit (Slurm backfill shadow time)
    grad_noise_scale: float | None = None  # Pollux φ (samples); None = unknown, efficiency 1
    batch_per_replica: int = 32  # samples per replica per step (Pollux statistical efficiency)
    comm_fraction: float = 0.0  # share of a step spent in gradient all-reduce at full size
    last_preempted_at: float | None = None  # for budgets and cascade damping
    preemptions: int = 0
    model: str = ""

    replica_gpus: int = field(init=False, repr=False, compare=False)
    replicas: int = field(init=False, repr=False, compare=False)
    min_replicas: int = field(init=False, repr=False, compare=False)
    max_replicas: int = field(init=False, repr=False, compare=False)
    elastic: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"{self.job_id}: gpus must be >= 1")
        if self.tp < 1 or self.pp < 1 or self.gpus % (self.tp * self.pp):
            raise ValueError(f"{self.job_id}: gpus {self.gpus} is not a multiple of tp×pp")
        if not 0 <= self.priority_class <= 3:
            raise ValueError(f"{self.job_id}: priority_class must be 0-3")
        per = self.tp * self.pp
        reps = self.gpus // per
        lo = self.elastic_min if self.elastic_min is not None else reps
        hi = self.elastic_max if self.elastic_max is not None else reps
        if not 1 <= lo <= hi:
            raise ValueError(f"{self.job_id}: elastic range [{lo}, {hi}] is empty")
        for name, value in (("replica_gpus", per), ("replicas", reps), ("min_replicas", lo),
                            ("max_replicas", hi), ("elastic", lo != hi)):
            object.__setattr__(self, name, value)

    # -- sizes (derived once in __post_init__; the cycle reads them thousands of times) -----------
    # replica_gpus: GPUs in one DP replica (tp × pp), the atomic unit of growth and shrink
    # replicas: requested DP degree; min_replicas/max_replicas: the elastic range; elastic: lo < hi
    @property
    def min_gpus(self) -> int:
        return self.min_replicas * self.replica_gpus

    @property
    def max_gpus(self) -> int:
        return self.max_replicas * self.replica_gpus

    # -- scaling -------------------------------------------------------------------------------
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

    def remaining_at(self, replicas: int) -> float | None:
        """Seconds to finish on ``replicas`` (``None`` when the work left is unknown)."""
        if self.work_remaining_s is None:
            return None
        r = self.rate(replicas)
        return self.work_remaining_s / r if r > 0 else float("inf")


@dataclass(frozen=True)
class RunningJob:
    """A started job: its exact assignment and resize/preemption history (immutable)."""

    job: Job
    assignment: Assignment  # node -> GPU indices
    start_time: float
    replicas: int  # current DP degree
    last_resize_time: float | None = None
    preempt_deadline: float | None = None  # set while a Preempt is in flight (signal sent)
    last_checkpoint_time: float | None = None

    gpus: int = field(init=False, repr=False, compare=False)  # GPUs held (derived)
    job_id: str = field(init=False, repr=False, compare=False)  # = job.job_id
    priority_class: int = field(init=False, repr=False, compare=False)  # = job.priority_class

    def __post_init__(self) -> None:
        frozen = MappingProxyType({n: tuple(sorted(g)) for n, g in sorted(self.assignment.items())})
        object.__setattr__(self, "assignment", frozen)
        object.__setattr__(self, "gpus", sum(len(g) for g in frozen.values()))
        object.__setattr__(self, "job_id", self.job.job_id)
        object.__setattr__(self, "priority_class", self.job.priority_class)

    def expected_end(self, now: float) -> float:
        """Best estimate of when the GPUs come back: the preemption deadline if signalled, else
        the work left, else the time limit, else never."""
        left = self.job.remaining_at(self.replicas)
        if left is not None:
            end = now + left
        elif self.job.time_limit_s is not None:
            end = max(now, self.start_time + self.job.time_limit_s)
        else:
            end = float("inf")
        return end if self.preempt_deadline is None else min(end, max(now, self.preempt_deadline))

    def work_since_checkpoint_s(self, now: float) -> float:
        """Wall-clock seconds of progress a preemption now would lose."""
        last = self.last_checkpoint_time if self.last_checkpoint_time is not None else self.start_time
        since = max(0.0, now - last)
        return since % self.job.checkpoint_interval_s if self.job.checkpoint_interval_s > 0 else since


__all__ = ["Assignment", "Job", "RunningJob", "SpeedupFn", "allreduce", "amdahl", "linear", "table"]
