"""The job progress model: how fast a job advances on a given allocation.

Work is measured in *seconds at the requested size on an ideal placement* (``TraceJob.duration_s``
is the total). On ``k`` data-parallel replicas placed on a concrete set of GPUs a job advances at

    rate = job.rate(k) × placement_factor

- ``job.rate(k)`` = speedup(k) / speedup(requested) from the job's scaling curve (the core's
  ``speedup_fn``): the measured per-size throughput table for Philly jobs, Amdahl with a 5 %
  serial share per replica for CSV jobs (``GENERIC_SERIAL``).
- ``placement_factor`` = 1 / ((1 − c) + c × T_ar(placement) / T_ar(best)), where ``c`` is the
  job's communication share (the fraction of a step spent in the gradient all-reduce on the best
  placement of its size) and ``T_ar`` the all-reduce time from ``railgang.topology.comm_model`` for the
  actual placement and for the most compact placement of the same size on an empty cluster.
  Single-node gangs have factor 1.
- Nothing advances while a job restores after a restart (``restore_cost_s``) or transitions after
  a resize (``transition_cost_s``); periodic checkpoint cost is assumed to be inside the trace's
  durations.
"""

from __future__ import annotations

from typing import Any, Protocol

from railgang.daemon.core.model.job import Assignment, JobRequest, gpu_count
from railgang.daemon.core.model.scaling import SpeedupFn, amdahl, table
from railgang.daemon.sim.traces.model import TraceJob

GENERIC_SERIAL = 0.05  # Amdahl serial share per replica for jobs without a measured curve
DEFAULT_COMM_SHARE = 0.2  # share of a step in all-reduce on the best placement (multi-node jobs)
ALLREDUCE_BYTES = 1 << 30  # gradient size used for the all-reduce ratio (only the ratio matters)
SEEN_MAX = 50_000  # placements whose all-reduce time TopologyComm keeps (then it starts afresh)


def speedup_for(tj: TraceJob) -> SpeedupFn:
    """The job's scaling curve in DP replicas (relative to one replica)."""
    per_replica = tj.tp * tj.pp
    if tj.throughput_by_gpus:
        points = {g // per_replica: thr for g, thr in tj.throughput_by_gpus.items()
                  if g % per_replica == 0 and g >= per_replica}
        base = points.get(1)
        if base:
            return table({k: v / base for k, v in points.items()})
    return amdahl(GENERIC_SERIAL)


def job_request(tj: TraceJob, *, comm_share: float = DEFAULT_COMM_SHARE,
                checkpoint_interval_s: float = 1800.0, checkpoint_cost_s: float = 60.0,
                restore_cost_s: float = 120.0, transition_cost_s: float = 30.0) -> JobRequest:
    """What a trace job asks the decision core for (built once, at submission)."""
    return JobRequest(
        job_id=tj.job_id, gpus=tj.gpus, account=tj.account, submit_time=tj.submit_time,
        tp=tj.tp, pp=tj.pp, elastic_min=tj.elastic_min, elastic_max=tj.elastic_max,
        priority_class=tj.priority_class, transition_cost_s=transition_cost_s,
        checkpoint_interval_s=checkpoint_interval_s, checkpoint_cost_s=checkpoint_cost_s,
        restore_cost_s=restore_cost_s, speedup_fn=speedup_for(tj),
        comm_fraction=comm_share if tj.gpus > 1 else 0.0, model=tj.model,
        time_limit_s=tj.time_limit_s, type_rates=tj.type_rates or None, serving=tj.serving)


class CommModel(Protocol):
    def factor(self, job: JobRequest, assignment: Assignment) -> float:
        """Placement factor in (0, 1]: 1 on the best placement of this size."""
        ...


class NoComm:
    """Placement never matters (for tests and as a fallback)."""

    def factor(self, job: JobRequest, assignment: Assignment) -> float:
        return 1.0


class TopologyComm:
    """Placement factor from ``railgang.topology.comm_model`` ring all-reduce times."""

    def __init__(self, fabric: Any, *, health: Any = None, nbytes: int = ALLREDUCE_BYTES) -> None:
        self.fabric = fabric
        self.health = health
        self.nbytes = nbytes
        self._best: dict[tuple[int, int, int], float] = {}
        # all-reduce times of the placements seen under one health (a LinkHealth is frozen and
        # the backend replaces it when a link changes): the same GPUs under the same links take
        # the same seconds, and evicted gangs restart on the GPUs they left
        self._seen: dict[tuple[tuple[str, tuple[int, ...]], ...], float] = {}
        self._seen_health: Any = None

    def _allreduce(self, assignment: Assignment, health: Any = None) -> float:
        from railgang.topology.comm_model import ring_allreduce_time_s

        gpus = [(node, g) for node, idx in assignment.items() for g in idx]
        return float(ring_allreduce_time_s(self.fabric, gpus, self.nbytes, health=health))

    def _allreduce_now(self, assignment: Assignment) -> float:
        """``_allreduce`` under the current health, kept for the placements seen under it."""
        key = tuple((node, tuple(idx)) for node, idx in assignment.items())  # the ring's order
        if self.health is not self._seen_health or len(self._seen) >= SEEN_MAX:
            self._seen, self._seen_health = {}, self.health
        t = self._seen.get(key)
        if t is None:
            t = self._seen[key] = self._allreduce(assignment, self.health)
        return t

    def best_time(self, job: JobRequest, gpus: int) -> float:
        """All-reduce time of the placement ``topology`` picks for this size on an empty cluster
        with healthy links (the reference a degraded link is measured against)."""
        key = (gpus, job.tp, job.pp)
        best = self._best.get(key)
        if best is None:
            from railgang.topology.placement import GangRequest, Unplaceable, place

            free = {n: frozenset(range(self.fabric.facts(n).gpus)) for n in self.fabric.nodes}
            result = place(self.fabric, free, GangRequest(gpus=gpus, tp=job.tp, pp=job.pp))
            best = 0.0 if isinstance(result, Unplaceable) else self._allreduce(result.gpus)
            self._best[key] = best
        return best

    def factor(self, job: JobRequest, assignment: Assignment) -> float:
        c = job.comm_fraction
        if c <= 0 or len(assignment) <= 1:
            return 1.0
        best = self.best_time(job, gpu_count(assignment))
        if best <= 0:
            return 1.0
        ratio = max(1.0, self._allreduce_now(assignment) / best)
        return 1.0 / ((1.0 - c) + c * ratio)


__all__ = ["DEFAULT_COMM_SHARE", "GENERIC_SERIAL", "CommModel", "NoComm", "TopologyComm",
           "job_request", "speedup_for"]
