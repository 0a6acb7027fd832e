"""Data starvation (R-Q7): a utilisation saw-tooth, std-dev of SM utilisation above 30 %.

The std-dev alone also fires on a checkpoint (one long gap between two busy stretches: the H200
recording's checkpoint phase has sd 48 %), so a window counts as starved only when it also
*saw-tooths*: at least ``starved_min_cycles`` falls from busy (>= 50 %) to idle (< 50 %).
Windows are ``starved_window_s`` long from the first sample; a window with fewer than
``min_window_samples`` samples is not judged. The job is starved when at least
``starved_min_share`` of its judged windows are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.detectors.base import Anomaly
from railgang.daemon.report.series import GpuSeries

BUSY_PCT = 50.0


@dataclass(frozen=True, slots=True)
class Starvation:
    windows: int  # judged
    starved: int
    sd_pct: float  # median std-dev over the starved windows (else over all)
    mean_pct: float

    @property
    def share(self) -> float:
        return self.starved / self.windows if self.windows else 0.0


def falls(sm: np.ndarray) -> int:
    busy = sm >= BUSY_PCT
    return int(np.count_nonzero(busy[:-1] & ~busy[1:]))


def starvation(s: GpuSeries, th: DetectorThresholds) -> Starvation:
    if len(s) < th.min_window_samples:
        return Starvation(0, 0, 0.0, float(np.mean(s.sm)) if len(s) else 0.0)
    idx = np.floor((s.t - s.t[0]) / th.starved_window_s).astype(np.int64)
    bounds = np.flatnonzero(np.diff(idx)) + 1
    sds, starved_sds = [], []
    judged = 0
    for w in np.split(s.sm, bounds):
        if len(w) < th.min_window_samples:
            continue
        judged += 1
        sd = float(np.std(w))
        sds.append(sd)
        if sd > th.starved_sd_pct and falls(w) >= th.starved_min_cycles:
            starved_sds.append(sd)
    pick = starved_sds or sds or [0.0]
    return Starvation(judged, len(starved_sds), float(np.median(pick)), float(np.mean(s.sm)))


def detect_starvation(job: str, team: str | None, series: list[GpuSeries],
                      th: DetectorThresholds) -> Anomaly | None:
    verdicts = [starvation(s, th) for s in series]
    windows = sum(v.windows for v in verdicts)
    starved = sum(v.starved for v in verdicts)
    if not windows or starved / windows < th.starved_min_share:
        return None
    sd = float(np.median([v.sd_pct for v in verdicts if v.starved] or [0.0]))
    mean = float(np.mean([v.mean_pct for v in verdicts]))
    first = float(min(s.t[0] for s in series if len(s)))
    return Anomaly("data_starvation", job, team, first, round(sd, 1), th.starved_sd_pct,
                   f"utilisation saw-tooths in {starved} of {windows} windows "
                   f"(std-dev {sd:.0f} %, mean {mean:.0f} %)",
                   "more data-loader workers, prefetching, or faster storage for the dataset")


__all__ = ["BUSY_PCT", "Starvation", "detect_starvation", "falls", "starvation"]
