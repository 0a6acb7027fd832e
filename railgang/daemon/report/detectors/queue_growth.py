"""Queue growing faster than it drains (R-Q7).

In each window of ``queue_window_s`` (stepped by half a window), compare the jobs that arrived
with the jobs that started: the queue grows faster than it drains when arrivals are at least
``queue_growth_ratio`` x starts and the depth grew by ``queue_min_growth_jobs``. Consecutive
flagged windows are reported once, with the worst ratio. ``inf`` ratio (nothing started) shows
as the arrivals count over zero starts.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.detectors.base import Anomaly


def queue_growth(arrivals: Sequence[float], starts: Sequence[float], since: float, until: float,
                 th: DetectorThresholds, *, subject: str = "queue") -> list[Anomaly]:
    """``arrivals``/``starts``: epoch seconds of jobs entering/leaving the queue (any order)."""
    arr, st = sorted(arrivals), sorted(starts)
    w = float(th.queue_window_s)
    out: list[Anomaly] = []
    run: tuple[float, float, int, int] | None = None  # start, worst ratio, arrivals, starts
    t = since
    while t + w <= until + 1e-9:
        a = bisect.bisect_left(arr, t + w) - bisect.bisect_left(arr, t)
        s = bisect.bisect_left(st, t + w) - bisect.bisect_left(st, t)
        ratio = a / s if s else float("inf")
        if a - s >= th.queue_min_growth_jobs and ratio >= th.queue_growth_ratio:
            if run is None or ratio > run[1]:
                run = (run[0] if run else t, ratio, a, s)
        elif run is not None:
            out.append(_anomaly(subject, run, th))
            run = None
        t += w / 2
    if run is not None:
        out.append(_anomaly(subject, run, th))
    return out


def _anomaly(subject: str, run: tuple[float, float, int, int],
             th: DetectorThresholds) -> Anomaly:
    start, ratio, a, s = run
    hours = th.queue_window_s / 3600
    return Anomaly("queue_growth", subject, None, start, round(min(ratio, 1e9), 2),
                   th.queue_growth_ratio,
                   f"{a} jobs arrived and {s} started in {hours:g} h (queue +{a - s})",
                   "look for a blocked pool, a drained leaf, or a quota at its limit")


__all__ = ["queue_growth"]
