"""The back-off of Starts Slurm refuses (issue 38 row 2; docs/slurm-backend.md, "Refused starts").

A Start Slurm refuses is refused again the next cycle: a hinted job with ``--gres=gpu:nope:1``
(22.05 accepts it under ``--hold``) was planned every cycle, refused every cycle, and while the
core planned it its GPUs were taken in the plan, so a gang needing every GPU never started. Its
lease kept Slurm from ever marking it BadConstraints. The backend remembers each refusal:

1. after a job's k-th refusal in a row it sits out the next ``2**(k-1)`` cycles (1, 2, 4, 8, ...,
   at most :data:`BACKOFF_MAX_CYCLES`): it is left out of the queue the core sees, so it takes
   no GPUs in the plan, blocks no gang and holds no backfill reservation. Its lease is still
   renewed, so Slurm does not run it natively meanwhile.
2. at ``slurm.start_refusals_max`` refusals in a row its lease is released (``StartTime`` set to
   now) and it is left to Slurm: this process never plans it or renews its lease again, and
   Slurm's own checks apply (22.05 marks the bad GRES ``BadConstraints``).
3. a Start Slurm accepts clears the job's refusals; a job that left the queue is forgotten.

Refusals that say slurmctld was busy or unreachable count for nothing: they are no fault of the
job. The memory is this process's only (like the renewal clock): a restarted daemon counts from
zero again, so each restart costs a bad job at most ``start_refusals_max`` more refused Starts,
and a job whose lease was released is not railgang's again unless Slurm lists it under a queue
reason (BeginTime, Priority, ...) when the new process starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from railgang.daemon.backend import HeldBack
from railgang.daemon.core.model.job import Job
from railgang.daemon.slurm.cli.runner import is_transient
from railgang.daemon.slurm.cli.snapshot import Observation

BACKOFF_MAX_CYCLES = 32  # the longest sit-out: about five minutes at the default 10 s cycle


@dataclass(frozen=True, slots=True)
class Refusals:
    """One job's refused Starts in a row."""

    count: int
    reason: str  # Slurm's one line, the latest
    sits_out: int  # cycles it sits out after the latest refusal
    until_cycle: int  # the first cycle it is planned again
    released: bool = False  # left to Slurm: its lease was released


def sit_out(refusals: int) -> int:
    """Cycles a job sits out after its ``refusals``-th refused Start in a row: 1, 2, 4, ...
    up to :data:`BACKOFF_MAX_CYCLES`."""
    return min(BACKOFF_MAX_CYCLES, 1 << max(0, min(refusals - 1, 30)))


def counts(detail: str) -> bool:
    """Whether a refusal is the job's own: not slurmctld busy, unreachable or timed out."""
    return not is_transient(detail) and "timed out" not in detail.lower()


class StartBackoff:
    """The refusals per job, and the jobs held out of the core's queue in the current cycle.

    ``max_refusals``: refusals in a row after which the job is left to Slurm."""

    def __init__(self, max_refusals: int) -> None:
        self.max_refusals = max(1, max_refusals)
        self.cycle = 0  # observations so far: the back-off's clock
        self._jobs: dict[str, Refusals] = {}
        self._held: list[HeldBack] = []

    def tick(self) -> None:
        """A new cycle begins (the backend observes)."""
        self.cycle += 1

    def refused(self, job_id: str, reason: str) -> Refusals:
        """Slurm refused ``job_id``'s Start in this cycle: it sits out, or is left to Slurm."""
        n = self._jobs[job_id].count + 1 if job_id in self._jobs else 1
        wait = sit_out(n)
        entry = Refusals(n, reason, wait, self.cycle + wait + 1, released=n >= self.max_refusals)
        self._jobs[job_id] = entry
        return entry

    def leave(self, job_id: str, reason: str) -> bool:
        """Leave ``job_id`` to Slurm for a rule railgang does not model (``rules.py``): held
        out of the queue like a job refused too often, with ``reason``, and no refusal
        counted. False when it was left to Slurm already (its lease is released once)."""
        entry = self._jobs.get(job_id)
        if entry is not None and entry.released:
            return False
        self._jobs[job_id] = Refusals(0, reason, 0, self.cycle, released=True)
        return True

    def started(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)

    def released(self) -> frozenset[str]:
        return frozenset(j for j, r in self._jobs.items() if r.released)

    def get(self, job_id: str) -> Refusals | None:
        return self._jobs.get(job_id)

    def hold_back(self, obs: Observation, waiting: Iterable[str]) -> Observation:
        """``obs`` without the jobs that sit out this cycle or were left to Slurm: out of the
        core's queue; those sitting out stay in ``leased`` (their lease is kept), the released
        ones leave it. ``waiting``: every job Slurm lists as pending (the others are forgotten).
        """
        pending = set(waiting)
        self._jobs = {j: r for j, r in self._jobs.items() if j in pending}
        self._held = []
        if not self._jobs:
            return obs
        keep: list[Job] = []
        for job in obs.snapshot.pending:
            entry = self._jobs.get(job.job_id)
            if entry is None or (not entry.released and self.cycle >= entry.until_cycle):
                keep.append(job)
                if entry is not None:  # back in the queue: explain still shows the refusal
                    self._held.append(_held(job, entry, held=False))
            else:
                self._held.append(_held(job, entry))
        released = self.released()
        held_ids = {h.job_id for h in self._held if h.held}
        for job_id in sorted(released - held_ids):  # left to Slurm under a reason of its own
            rec = obs.jobs.get(job_id)
            if rec is not None and rec.tag is not None:
                entry = self._jobs[job_id]
                self._held.append(HeldBack(
                    job_id=job_id, account=rec.account, priority_class=int(rec.tag.priority_class),
                    gpus=rec.gpus_requested, needed=rec.gpus_requested, refusals=entry.count,
                    reason=entry.reason, sits_out=0, left_to_slurm=True,
                    kind="refused" if entry.count else "rules"))
        if len(keep) == len(obs.snapshot.pending) and not (released & set(obs.leased)):
            return obs
        return replace(obs, snapshot=obs.snapshot.replace(pending=tuple(keep)),
                       leased=tuple(j for j in obs.leased if j not in released))

    def held(self) -> list[HeldBack]:
        """The waiting jobs with refusals on record in the current cycle, held out of the
        core's queue or back in it, and why."""
        return list(self._held)

    def snapshot(self) -> Mapping[str, Refusals]:
        return dict(self._jobs)


def _held(job: Job, entry: Refusals, held: bool = True) -> HeldBack:
    return HeldBack(job_id=job.job_id, account=job.account, priority_class=int(job.priority_class),
                    gpus=job.gpus, needed=job.min_gpus, refusals=entry.count, reason=entry.reason,
                    sits_out=0 if entry.released else entry.sits_out, left_to_slurm=entry.released,
                    held=held, kind="refused" if entry.count else "rules")


__all__ = ["BACKOFF_MAX_CYCLES", "Refusals", "StartBackoff", "counts", "sit_out"]
