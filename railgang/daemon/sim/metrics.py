"""Metrics of one simulated run, computed from per-job records (pure; no simulator state).

Definitions (docs/simulator.md has the long form):

- JCT = finish - submit; queueing delay = first start - submit.
- makespan = last finish - first submit.
- utilisation, allocated = GPU-seconds held by jobs / (cluster GPUs x makespan); productive =
  GPU-seconds that advanced a model (excludes communication time, restore/warm-up and resize
  transitions, and work later thrown away by a preemption) over the same denominator.
- finish-time fairness rho (Themis) = JCT / T_ideal, with T_ideal the run time the job would have
  on an independent 1/N share of the cluster, N the time-averaged number of jobs in the system
  while it was there: T_ideal = duration x max(1, gpus / (C / N)). Reported as a distribution
  (p50/p90/p99/max, share above 2) over all finished jobs and over "big" jobs of at least one
  GPU-hour (gpus x duration), and per account (mean, p50/p90/p99, max, share above 2, big max).
- idle while waiting (work conservation) = GPU-seconds left free after a cycle that a pending job
  could have used by count (``recorder.Recorder.cycle``), split by the core's pending reason; the
  "placeable" part leaves out reasons that say the free GPUs had no valid gang slot.
- GPU-hours lost to preemption = (work since the last checkpoint + restore time) x GPUs.
- Rejected jobs (larger than the cluster) and jobs unfinished at the end are counted, not timed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from railgang.daemon.core.model.reasons import Reason

BIG_JOB_GPU_H = 1.0  # "jobs of at least one GPU-hour" (gpus x ideal duration)
# reasons that say the free GPUs, though enough by count, held no valid slot for the job
_NOT_PLACEABLE = frozenset(r.value for r in (
    Reason.FRAGMENTED, Reason.QUARANTINED, Reason.GPU_MEMORY, Reason.NO_NVLINK,
    Reason.INVALID_SHAPE, Reason.WAITING_FOR_GPUS))


@dataclass(slots=True)
class JobRecord:
    """What happened to one job (filled in by the engine, read by the metrics)."""

    job_id: str
    account: str
    gpus: int
    submit: float
    duration_s: float  # ideal run time on `gpus` GPUs
    start: float | None = None  # first start
    finish: float | None = None
    rejected: str | None = None  # why it never could run
    preemptions: int = 0
    resizes: int = 0
    lost_gpu_s: float = 0.0
    allocated_gpu_s: float = 0.0
    productive_gpu_s: float = 0.0
    mean_jobs_in_system: float = 1.0  # N for the 1/N share of rho
    # GPU-seconds left idle while this job waited and would have fit by count, per pending reason
    idle_fit_gpu_s: dict[str, float] = field(default_factory=dict)
    # typed or priced capacity (``--gpus``): GPU-seconds held per "type:tier" pool, what they
    # cost, and how many of the preemptions were spot interruptions
    pool_gpu_s: dict[str, float] = field(default_factory=dict)
    cost_usd: float = 0.0
    interruptions: int = 0
    # leaves its first start spanned (0: never started; 1 on a fabric without leaves), so a
    # replay shows which gangs stayed inside one leaf (issue 21: whole-leaf gangs)
    first_leaves: int = 0

    @property
    def gpu_hours(self) -> float:
        """Size of the job: GPUs x ideal run time, in hours."""
        return self.gpus * self.duration_s / 3600.0

    @property
    def jct(self) -> float | None:
        return None if self.finish is None else self.finish - self.submit

    @property
    def queueing(self) -> float | None:
        return None if self.start is None else self.start - self.submit

    def rho(self, cluster_gpus: int) -> float | None:
        jct = self.jct
        if jct is None:
            return None
        share = cluster_gpus / max(1.0, self.mean_jobs_in_system)
        ideal = self.duration_s * max(1.0, self.gpus / share)
        return jct / ideal if ideal > 0 else None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); ``nan`` when empty."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


@dataclass(frozen=True, slots=True)
class AccountMetrics:
    account: str
    jobs: int
    finished: int
    mean_jct_s: float
    mean_queueing_s: float
    max_rho: float
    gpu_hours: float
    rho_mean: float = math.nan
    rho_p99: float = math.nan
    idle_while_waiting_gpu_h: float = 0.0  # charged to this account's waiting jobs
    # the rest of ρ's distribution for this account, and its jobs of at least one GPU-hour
    rho_p50: float = math.nan
    rho_p90: float = math.nan
    rho_share_above_2: float = 0.0
    big_jobs_finished: int = 0
    rho_big_max: float = math.nan


@dataclass(frozen=True, slots=True)
class Metrics:
    jobs: int
    finished: int
    rejected: int
    unfinished: int
    mean_jct_s: float
    median_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    mean_queueing_s: float
    median_queueing_s: float
    p99_queueing_s: float
    makespan_s: float
    util_allocated: float
    util_productive: float
    rho_mean: float
    rho_max: float
    rho_share_above_2: float
    preemptions: int
    resizes: int
    gpu_hours_lost_to_preemption: float
    per_account: tuple[AccountMetrics, ...] = field(default=())
    # finish-time fairness as a distribution (all finished jobs; "big" = at least 1 GPU-hour)
    rho_p50: float = math.nan
    rho_p90: float = math.nan
    rho_p99: float = math.nan
    big_jobs_finished: int = 0
    rho_big_p50: float = math.nan
    rho_big_p90: float = math.nan
    rho_big_p99: float = math.nan
    rho_big_max: float = math.nan
    rho_big_share_above_2: float = 0.0
    # work conservation: GPU-hours idle while a waiting job would have fit (by count), by reason
    idle_while_waiting_gpu_h: float = 0.0
    idle_while_waiting_placeable_gpu_h: float = 0.0
    idle_while_waiting_by_reason: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["per_account"] = [asdict(a) for a in self.per_account]
        return data


def compute(records: Iterable[JobRecord], cluster_gpus: int) -> Metrics:
    recs = list(records)
    done = [r for r in recs if r.finish is not None]
    jcts = sorted(r.finish - r.submit for r in done if r.finish is not None)
    waits = sorted(r.start - r.submit for r in recs if r.start is not None)
    rho_of = {id(r): x for r in done if (x := r.rho(cluster_gpus)) is not None}
    rhos = list(rho_of.values())
    rho_sorted = sorted(rhos)
    big = sorted(x for r in done if r.gpu_hours >= BIG_JOB_GPU_H
                 and (x := rho_of.get(id(r))) is not None)
    idle: dict[str, float] = defaultdict(float)
    for r in recs:
        for reason, gpu_s in r.idle_fit_gpu_s.items():
            idle[reason] += gpu_s / 3600.0
    timed = [r for r in recs if r.rejected is None]
    first = min((r.submit for r in timed), default=0.0)
    last = max((r.finish for r in done if r.finish is not None), default=first)
    makespan = max(0.0, last - first)
    capacity = cluster_gpus * makespan
    by_account: dict[str, list[JobRecord]] = defaultdict(list)
    for r in recs:
        by_account[r.account].append(r)
    accounts = []
    for name in sorted(by_account):
        group = by_account[name]
        fin = [r for r in group if r.finish is not None]
        acc_rho = sorted(x for r in fin if (x := rho_of.get(id(r))) is not None)
        acc_big = [x for r in fin if r.gpu_hours >= BIG_JOB_GPU_H
                   and (x := rho_of.get(id(r))) is not None]
        accounts.append(AccountMetrics(
            account=name, jobs=len(group), finished=len(fin),
            mean_jct_s=_mean([r.finish - r.submit for r in fin if r.finish is not None]),
            mean_queueing_s=_mean([r.start - r.submit for r in group if r.start is not None]),
            max_rho=max(acc_rho, default=math.nan),
            gpu_hours=sum(r.allocated_gpu_s for r in group) / 3600.0,
            rho_mean=_mean(acc_rho), rho_p99=percentile(acc_rho, 99),
            idle_while_waiting_gpu_h=sum(sum(r.idle_fit_gpu_s.values()) for r in group) / 3600,
            rho_p50=percentile(acc_rho, 50), rho_p90=percentile(acc_rho, 90),
            rho_share_above_2=(sum(1 for x in acc_rho if x > 2) / len(acc_rho)) if acc_rho else 0.0,
            big_jobs_finished=len(acc_big), rho_big_max=max(acc_big, default=math.nan)))
    return Metrics(
        jobs=len(recs), finished=len(done),
        rejected=sum(1 for r in recs if r.rejected is not None),
        unfinished=sum(1 for r in recs if r.rejected is None and r.finish is None),
        mean_jct_s=_mean(jcts), median_jct_s=percentile(jcts, 50),
        p95_jct_s=percentile(jcts, 95), p99_jct_s=percentile(jcts, 99),
        mean_queueing_s=_mean(waits), median_queueing_s=percentile(waits, 50),
        p99_queueing_s=percentile(waits, 99), makespan_s=makespan,
        util_allocated=sum(r.allocated_gpu_s for r in recs) / capacity if capacity else 0.0,
        util_productive=sum(r.productive_gpu_s for r in recs) / capacity if capacity else 0.0,
        rho_mean=_mean(rhos), rho_max=max(rhos, default=math.nan),
        rho_share_above_2=(sum(1 for x in rhos if x > 2) / len(rhos)) if rhos else 0.0,
        preemptions=sum(r.preemptions for r in recs), resizes=sum(r.resizes for r in recs),
        gpu_hours_lost_to_preemption=sum(r.lost_gpu_s for r in recs) / 3600.0,
        per_account=tuple(accounts),
        rho_p50=percentile(rho_sorted, 50), rho_p90=percentile(rho_sorted, 90),
        rho_p99=percentile(rho_sorted, 99), big_jobs_finished=len(big),
        rho_big_p50=percentile(big, 50), rho_big_p90=percentile(big, 90),
        rho_big_p99=percentile(big, 99), rho_big_max=max(big, default=math.nan),
        rho_big_share_above_2=(sum(1 for x in big if x > 2) / len(big)) if big else 0.0,
        idle_while_waiting_gpu_h=sum(idle.values()),
        idle_while_waiting_placeable_gpu_h=sum(v for k, v in idle.items()
                                               if k not in _NOT_PLACEABLE),
        idle_while_waiting_by_reason=dict(sorted(idle.items(), key=lambda kv: -kv[1])))


# metric key, label, unit; "lower is better" for all but utilisation
HEADLINE = (
    ("mean_jct_s", "mean JCT", "h"),
    ("median_jct_s", "median JCT", "h"),
    ("p95_jct_s", "p95 JCT", "h"),
    ("p99_jct_s", "p99 JCT", "h"),
    ("mean_queueing_s", "mean queueing", "h"),
    ("makespan_s", "makespan", "h"),
    ("util_allocated", "util allocated", "%"),
    ("util_productive", "util productive", "%"),
    ("rho_mean", "ρ mean", ""),
    ("rho_max", "ρ max", ""),
    ("rho_share_above_2", "share ρ>2", "%"),
    ("preemptions", "preemptions", ""),
    ("resizes", "resizes", ""),
    ("gpu_hours_lost_to_preemption", "GPU-h lost (preempt)", ""),
)

__all__ = ["BIG_JOB_GPU_H", "HEADLINE", "AccountMetrics", "JobRecord", "Metrics", "compute", "percentile"]
