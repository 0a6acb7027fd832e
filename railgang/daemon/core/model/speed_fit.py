"""Scaling curves fitted to measured throughput (issue 33 item 2; pure, no I/O).

The daemon measures a job's samples/s at each replica count Slurm has run it at (the training
helper's progress report, ``slurm/cli/speed.py``). This module turns those rates into the job's
``speedup_fn`` and bounds what a report may claim.

The curve is Amdahl's law over the data-parallel degree, rate(k) = r₁ / (s + (1 − s)/k): ``s`` is
the share of a one-replica step that does not get faster with more replicas (the gradient
all-reduce, input pipeline, optimizer step). It is fitted as a straight line 1/rate = a + b/k
(least squares weighted by the reports behind each size; s = a / (a + b), r₁ = 1 / (a + b)).
Pollux fits a richer throughput model (compute + all-reduce per node count); with the two to
four sizes an elastic job visits, the one-parameter Amdahl shape is what the data can hold.

How much measurement it trusts:

1. a size counts once it has :data:`MIN_REPORTS` reports (one report is one training step's
   rate, noisy after a start or a resize);
2. two counted sizes or more: the fit (source ``measured``); fewer: the job's model prior (the
   same user's earlier runs of the same model, source ``model prior``), else a straight line
   (source ``default``), as every job had before;
3. never better than linear: s is clamped to [0, 1], so a fit through noisy (or forged)
   super-linear points is a straight line, and flat data gives a flat curve (no gain from growth).

:func:`bound_claim` bounds one report before it is counted (docs/security.md, "Speed reports").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from railgang.daemon.core.model.job import Job

MIN_REPORTS = 3  # reports at one size before that size counts in the fit
OUTLIER_FACTOR = 2.0  # a report more than this far from its size's median is clamped to it
PRIOR_SLACK = 1.5  # a claim may beat the model prior's per-replica rate by this factor at most
MAX_RATE = 1e9  # samples/s: the progress parser's own bound

DEFAULT, PRIOR, MEASURED = "default", "model prior", "measured"


@dataclass(frozen=True)
class fitted:  # lower case: reads as a curve, like scaling.amdahl
    """An Amdahl curve fitted to measured rates: ``speedup(k) = 1 / (s + (1 − s)/k)``.

    Callable as a ``speedup_fn``; its fields are what ``railgang explain`` shows."""

    serial: float = 0.0  # s: the share of a one-replica step more replicas do not speed up
    source: str = DEFAULT  # measured / model prior / default
    rates: tuple[tuple[int, float, int], ...] = ()  # (replicas, samples/s, reports) measured
    # the measured costs (blended with the constants) behind the job's transition_cost_s and
    # restore_cost_s; None: the constant
    resize_s: float | None = None
    restore_s: float | None = None

    def __call__(self, k: int) -> float:
        if k <= 0:
            return 0.0
        return 1.0 / (self.serial + (1.0 - self.serial) / k)


LINEAR = fitted()


def fit_serial(rates: Mapping[int, tuple[float, int]]) -> float | None:
    """s from rates {replicas: (samples/s, reports)} at two sizes or more (None: fewer, or no
    line can be fitted). Weighted least squares of 1/rate on 1/k; s is clamped to [0, 1]."""
    pts = [(1.0 / k, 1.0 / r, float(n)) for k, (r, n) in rates.items() if k >= 1 and r > 0]
    if len({x for x, _, _ in pts}) < 2:
        return None
    w = sum(n for _, _, n in pts)
    mx = sum(x * n for x, _, n in pts) / w
    my = sum(y * n for _, y, n in pts) / w
    sxx = sum(n * (x - mx) ** 2 for x, _, n in pts)
    b = sum(n * (x - mx) * (y - my) for x, y, n in pts) / sxx
    a = my - b * mx
    if b <= 0:  # more replicas never faster: flat
        return 1.0
    if a <= 0:  # super-linear: never trusted beyond a straight line
        return 0.0
    s = a / (a + b)
    return min(1.0, max(0.0, s)) if math.isfinite(s) else None


def fit_curve(own: Mapping[int, tuple[float, int]],
              prior: Mapping[int, tuple[float, int]] | None = None) -> fitted:
    """The job's curve from its own rates and its model prior's (each {replicas: (samples/s,
    reports)}); only sizes with :data:`MIN_REPORTS` reports count (rule 1 above)."""
    mine = {k: v for k, v in own.items() if v[1] >= MIN_REPORTS}
    shown = tuple(sorted((k, r, n) for k, (r, n) in own.items()))
    s = fit_serial(mine)
    if s is not None:
        return fitted(s, MEASURED, shown)
    theirs = {k: v for k, v in (prior or {}).items() if v[1] >= MIN_REPORTS}
    s = fit_serial(theirs | mine)  # the job's own rate wins at a size both measured
    if s is not None:
        return fitted(s, PRIOR, shown)
    return fitted(0.0, DEFAULT, shown)


def bound_claim(k: int, sps: float, own: Mapping[int, tuple[float, int]],
                prior: Mapping[int, tuple[float, int]] | None = None) -> float | None:
    """The samples/s a report claiming ``sps`` at ``k`` replicas counts as (None: not counted).

    A report is the user's own Comment: not finite, not positive or above :data:`MAX_RATE` is not
    counted; it never counts above ``k/j`` × the job's own median at any smaller size ``j``
    (no super-linear claim), nor above :data:`PRIOR_SLACK` × ``k/j`` × the model prior's; once
    its size has :data:`MIN_REPORTS` reports it is clamped to within :data:`OUTLIER_FACTOR` of
    that size's median (an outlier jump)."""
    if k < 1 or not math.isfinite(sps) or sps <= 0 or sps > MAX_RATE:
        return None
    cap = MAX_RATE
    for j, (r, n) in own.items():
        if j < k and n >= 1:
            cap = min(cap, r * k / j)
    for j, (r, n) in (prior or {}).items():
        if j <= k and n >= MIN_REPORTS:
            cap = min(cap, PRIOR_SLACK * r * k / j)
    sps = min(sps, cap)
    here = own.get(k)
    if here is not None and here[1] >= MIN_REPORTS:
        sps = min(max(sps, here[0] / OUTLIER_FACTOR), here[0] * OUTLIER_FACTOR)
    return sps


def describe(job: Job) -> dict[str, Any] | None:
    """What ``railgang explain`` shows of a job's speed (None: nothing measured, the constants):
    the measured samples/s per size, the curve at the sizes it may run at and where it comes
    from, and the costs the core prices a resize and a restart with, each with its source."""
    curve = job.speedup_fn
    if not isinstance(curve, fitted):
        return None
    ks = sorted({1, job.min_replicas, job.replicas, job.max_replicas, *(k for k, _, _ in curve.rates)})
    return {"source": curve.source, "serial": round(curve.serial, 4),
            "rates": [[k, round(r, 3), n] for k, r, n in curve.rates],
            "speedup": [[k, round(curve(k), 3)] for k in ks],
            "resize_s": [round(job.transition_cost_s, 1),
                         MEASURED if curve.resize_s is not None else DEFAULT],
            "restore_s": [round(job.restore_cost_s, 1),
                          MEASURED if curve.restore_s is not None else DEFAULT],
            "checkpoint_s": [round(job.checkpoint_cost_s, 1), DEFAULT]}


def blend_cost(prior_s: float, measured: tuple[float, ...]) -> float:
    """A cost in seconds: the mean of the measured ones with the prior counted as one of them
    (one measurement moves it half way; a job's own history outweighs the constant)."""
    vals = [v for v in measured if math.isfinite(v) and v >= 0]
    return (prior_s + sum(vals)) / (1 + len(vals))


__all__ = ["DEFAULT", "LINEAR", "MEASURED", "MIN_REPORTS", "OUTLIER_FACTOR", "PRIOR",
           "PRIOR_SLACK", "blend_cost", "bound_claim", "describe", "fit_curve", "fit_serial", "fitted"]
