"""How wrong is the start-time estimate: replay a trace, estimate at sampled moments, compare.

:func:`measure` replays a trace through the simulator under a policy (the ground truth). Each job
carries a time limit (:func:`with_time_limits` gives a trace one, the way users pick them); the
replayed core sees limits, not the work left, as the daemon on Slurm does. At each sampled moment
the replay's own snapshot goes to :func:`~railgang.daemon.service.estimate.estimate_starts`, with
the run-time ratio history of the jobs finished by then, exactly what the daemon would have; the
prediction for every waiting job is kept and compared with when the replay really started it.

Variants of what is known about run times (``VARIANTS``): ``history`` (time limits × the ratio
history, the daemon's default), ``limit`` (time limits only), ``progress`` (running jobs report
the work they have left, as a training job could through the training contract; queued jobs as
in ``history``).

Future arrivals are unknown to the estimate, and they are in the replay: that is most of the
error on a busy cluster. docs/estimate.md shows the measured numbers.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from railgang.daemon.core.model.job import JobState, PriorityClass
from railgang.daemon.core.model.snapshot import Snapshot
from railgang.daemon.core.policies import registry
from railgang.daemon.service.estimate import EstimateConfig, RatioHistory, estimate_starts
from railgang.daemon.service.estimate_calibration import (
    Coverage,
    IntervalCalibration,
    Outcome,
    replay,
)
from railgang.daemon.sim.backend import SimBackend, SimConfig
from railgang.daemon.sim.engine import EngineConfig, simulate
from railgang.daemon.sim.traces.model import TraceJob

VARIANTS = ("history", "limit", "progress")
STANDARD_LIMITS_H = (0.5, 1, 2, 4, 8, 12, 24, 48, 72, 168, 336, 720)  # what users type


def with_time_limits(jobs: Sequence[TraceJob], seed: int = 0) -> list[TraceJob]:
    """The trace with a time limit per job, the way users pick them: each account has its own
    typical actual/requested ratio (uniform 0.15-0.85), a job's ratio scatters around it, and the
    limit is rounded up to a common value; one job in ten runs into its limit (limit = run
    time). Traces record run times, not limits, so this part is synthetic (docs/estimate.md)."""
    rng = random.Random(seed)
    typical: dict[str, float] = {}
    out = []
    for tj in jobs:
        mean = typical.setdefault(tj.account, rng.uniform(0.15, 0.85))
        if rng.random() < 0.1:
            limit = tj.duration_s
        else:
            ratio = min(1.0, max(0.02, rng.gauss(mean, 0.15)))
            want_h = tj.duration_s / ratio / 3600.0
            limit = 3600.0 * next((h for h in STANDARD_LIMITS_H if h >= want_h),
                                  math.ceil(want_h))
        out.append(dataclasses.replace(tj, time_limit_s=max(limit, tj.duration_s)))
    return out


def synthetic(n: int = 600, *, gpus: int = 128, load: float = 0.9, seed: int = 1) -> list[TraceJob]:
    """A seeded synthetic trace: Poisson arrivals at ``load`` of ``gpus``, sizes 1-32 GPUs,
    log-normal run times (median 1 h), six accounts, mostly batch with some class 1-2 work."""
    rng = random.Random(seed)
    sizes, weights = (1, 2, 4, 8, 16, 32), (30, 15, 20, 25, 7, 3)
    mean_gpu_s = sum(s * w for s, w in zip(sizes, weights, strict=True)) / sum(weights) * (
        3600.0 * math.exp(1.2**2 / 2))
    gap = mean_gpu_s / (gpus * load)
    t, jobs = 0.0, []
    for i in range(n):
        t += rng.expovariate(1.0 / gap)
        size = rng.choices(sizes, weights)[0]
        priority_class = rng.choices((3, 2, 1), (80, 15, 5))[0]
        jobs.append(TraceJob(job_id=f"syn{i:05d}", submit_time=round(t, 1), gpus=size,
                             duration_s=round(min(48 * 3600.0, max(60.0, rng.lognormvariate(
                                 math.log(3600.0), 1.2))), 1),
                             account=f"acct{rng.randrange(6)}", tp=min(size, 8), priority_class=PriorityClass(priority_class)))
    return jobs


@dataclass
class Prediction:
    variant: str
    job_id: str
    at: float
    status: str
    start_s: float | None
    p10_s: float | None
    p90_s: float | None
    not_before_s: float | None
    actual_s: float | None = None  # filled in during the replay (None: never started)
    profiled: bool = False  # placed on the GPU-count profile past the simulation's budget


@dataclass
class Measurement:
    predictions: list[Prediction] = field(default_factory=list)
    wall_ms: dict[str, list[float]] = field(default_factory=dict)
    moments: int = 0
    queue: list[int] = field(default_factory=list)  # waiting jobs at each moment
    replay_s: float = 0.0
    unfinished: int = 0  # jobs the replay never finished (their predictions keep actual None)
    min_scores: int = 20  # starts seen before intervals are widened (IntervalCalibration)

    def summary(self, variant: str, source: str | None = None) -> dict[str, Any]:
        """Median / p90 absolute error (h) and interval coverage over estimated jobs that
        started, raw and as the daemon shows it (widened by the starts known at each moment,
        estimate_calibration.py); honesty of the censored ones (did they really start later?).
        ``source``: only the estimates the simulation reached (``simulated``) or those placed
        on the profile (``profile``); the calibration still learns from all, as the daemon's."""
        ps = [p for p in self.predictions if p.variant == variant]
        est = [p for p in ps if p.status == "estimated" and p.actual_s is not None]
        outcomes = dict(zip(map(id, est), self.outcomes(est), strict=True))
        if source is not None:
            ps = [p for p in ps if p.profiled == (source == "profile")]
            est = [p for p in est if p.profiled == (source == "profile")]
        errors = sorted(abs((p.start_s or 0.0) - (p.actual_s or 0.0)) / 3600.0 for p in est)
        censored = [p for p in ps if p.status in ("budget", "beyond_horizon")]
        held = [p for p in censored if p.actual_s is None
                or p.actual_s >= (p.not_before_s or 0.0) - 60.0]
        walls = sorted(self.wall_ms.get(variant, []))
        cov = Coverage.of([outcomes[id(p)] for p in est])
        ci = moment_interval([(p.at, outcomes[id(p)].inside) for p in est
                              if outcomes[id(p)].calibrated])

        def h(seconds: float | None) -> float | None:
            return None if seconds is None else round(seconds / 3600, 2)

        def r(share: float | None) -> float | None:
            return None if share is None else round(share, 3)

        return {
            "predictions": len(ps), "estimated": len(est),
            "median_err_h": round(statistics.median(errors), 2) if errors else None,
            "p90_err_h": round(errors[max(0, math.ceil(0.9 * len(errors)) - 1)], 2)
            if errors else None,
            "coverage": r(cov.raw), "coverage_shown": r(cov.shown), "calibrated": cov.calibrated,
            "coverage_once_calibrated": r(cov.once_calibrated),
            "coverage_ci": None if ci is None else (r(ci[0]), r(ci[1])),
            # median p10-p90 width of the calibrated intervals, raw and as shown
            "width_raw_h": h(cov.raw_width_s), "width_shown_h": h(cov.shown_width_s),
            "median_actual_wait_h": round(statistics.median(
                p.actual_s or 0.0 for p in est) / 3600.0, 2) if est else None,
            "censored": len(censored), "censored_held": len(held),
            "never": sum(p.status == "never" for p in ps),
            "wall_ms_median": round(statistics.median(walls), 1) if walls else None,
            "wall_ms_max": round(walls[-1], 1) if walls else None,
        }

    def outcomes(self, est: Sequence[Prediction]) -> list[Outcome]:
        """Each estimated and started prediction's interval as the daemon would have shown it
        (one calibration, settled per job and grouped by where the estimate came from, as the
        daemon does)."""
        return replay(((p.at, p.p10_s or 0.0, p.p90_s, p.actual_s or 0.0, p.job_id,
                        "profile" if p.profiled else "simulated") for p in est),
                      IntervalCalibration(min_scores=self.min_scores))


def moment_interval(inside: Sequence[tuple[float, bool]], *, level: float = 0.9,
                    resamples: int = 1000, seed: int = 0) -> tuple[float, float] | None:
    """A ``level`` bootstrap interval of a coverage share over ``(moment, inside)`` pairs that
    resamples whole moments: the intervals made at one moment miss together (the same later
    arrivals overtake them all), so they are not independent. None with fewer than 2 moments."""
    by: dict[float, list[bool]] = {}
    for at, ok in inside:
        by.setdefault(at, []).append(ok)
    groups = [(sum(v), len(v)) for v in by.values()]
    if len(groups) < 2:
        return None
    rng = random.Random(seed)
    shares = []
    for _ in range(resamples):
        pick = rng.choices(groups, k=len(groups))
        shares.append(sum(k for k, _ in pick) / sum(n for _, n in pick))
    shares.sort()
    tail = (1.0 - level) / 2
    return shares[int(tail * resamples)], shares[min(resamples - 1, int((1 - tail) * resamples))]


def _with_progress(snap: Snapshot, backend: SimBackend) -> Snapshot:
    """Running jobs report the work they have left (what the replay knows exactly)."""
    running = {}
    for job_id, run in snap.running.items():
        attained, remaining = backend.running[job_id].progress_at(snap.now)
        s = run.job.state
        running[job_id] = run.with_job(run.job.with_state(
            JobState(attained, remaining, s.preemptions, s.last_preempted_at)))
    return snap.replace(running=running)


def measure(jobs: Sequence[TraceJob], fabric: Any, *, policy: str = "default",
            moments: int = 10, variants: Sequence[str] = VARIANTS,
            config: EstimateConfig = EstimateConfig(), cycle_s: float = 60.0,
            max_targets: int | None = None, min_queue: int = 1) -> Measurement:
    """Replay ``jobs`` (with time limits) and estimate at ``moments`` evenly spaced times
    between the first and the last arrival; see the module docstring. ``max_targets`` limits the
    jobs estimated per moment to the first ones in queue order (None: all waiting); a moment
    with fewer than ``min_queue`` waiting is passed over (deep queues: the profile's estimates).
    """
    out = Measurement()
    first, last = jobs[0].submit_time, jobs[-1].submit_time
    times = [first + (last - first) * (i + 0.5) / moments for i in range(moments)]
    limits = {tj.job_id: tj.time_limit_s for tj in jobs}

    def history_at(backend: SimBackend, now: float) -> RatioHistory:
        h = RatioHistory()
        done = sorted((r for r in backend.records if r.finish is not None and r.finish <= now
                       and r.start is not None and r.preemptions == 0), key=lambda r: r.finish or 0)
        for r in done:
            limit = limits.get(r.job_id)
            if limit:
                h.add(r.account, backend_class[r.job_id], ((r.finish or 0) - (r.start or 0)) / limit)
        return h

    backend_class = {tj.job_id: tj.priority_class for tj in jobs}

    waiting: dict[str, list[Prediction]] = {}  # predicted, not started since

    def observe(now: float, backend: SimBackend) -> None:
        # starts happen in cycles and this runs after each: a job running now that waited at a
        # moment started at this cycle's time (its first start after the moment, even if it had
        # run and been preempted before)
        for job_id in [j for j in waiting if j in backend.running]:
            for p in waiting.pop(job_id):
                p.actual_s = now - p.at
        if not times or now < times[0]:
            return
        while times and now >= times[0]:
            times.pop(0)
        if len(backend.pending) < max(1, min_queue):
            return
        snap = backend.snapshot(now)
        if not snap.pending:
            return
        out.moments += 1
        out.queue.append(len(snap.pending))
        targets = [j.job_id for j in snap.pending][:max_targets]
        for variant in variants:
            history = history_at(backend, now) if variant != "limit" else RatioHistory()
            seen = _with_progress(snap, backend) if variant == "progress" else snap
            t = time.perf_counter()
            est = estimate_starts(seen, registry.get(policy), history=history, config=config,
                                  targets=targets)
            out.wall_ms.setdefault(variant, []).append((time.perf_counter() - t) * 1e3)
            for job_id, e in est.jobs.items():
                p = Prediction(variant, job_id, now, e.status, e.start_s, e.p10_s, e.p90_s,
                               e.not_before_s, profiled=e.profiled)
                out.predictions.append(p)
                waiting.setdefault(job_id, []).append(p)

    t0 = time.perf_counter()
    result = simulate(jobs, registry.get(policy), fabric,
                      config=EngineConfig(sim=SimConfig(oracle=False), cycle_s=cycle_s),
                      observer=observe)
    out.replay_s = time.perf_counter() - t0
    out.unfinished = len(result.unfinished_reasons)
    return out


__all__ = ["STANDARD_LIMITS_H", "VARIANTS", "Measurement", "Prediction", "measure",
           "moment_interval", "synthetic", "with_time_limits"]
