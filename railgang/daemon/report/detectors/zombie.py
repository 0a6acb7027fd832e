"""Zombie jobs (R-Q7): memory held while no kernel runs (SM < 5 %) for more than 10 minutes.

An episode is a run of consecutive samples with SM below ``zombie_sm_pct`` and memory at or
above ``zombie_min_mem_mib`` (more than a bare CUDA context). Two more checks keep pauses that
are part of healthy work out: the episode must last ``zombie_min_s`` (a checkpoint write or an
evaluation pause is shorter), and where power is known its median must stay within
``zombie_power_ratio`` x the GPU's lowest power in the series (the idle floor) (the H200 recordings: a stalled
but working GPU sits near 330 W, a zombie at 120 W, idle at 80-120 W). A sampling gap longer
than the episode's own median interval x 3 ends it: no samples is no evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.detectors.base import Anomaly
from railgang.daemon.report.series import GpuSeries


@dataclass(frozen=True, slots=True)
class Episode:
    start: float
    end: float  # time of the last sample in the episode
    mem_mib: float  # median memory held
    power_w: float | None

    @property
    def duration_s(self) -> float:
        return self.end - self.start


def zombie_episodes(s: GpuSeries, th: DetectorThresholds) -> list[Episode]:
    if len(s) < 2 or s.mem_mib is None:
        return []
    quiet = (s.sm < th.zombie_sm_pct) & (s.mem_mib >= th.zombie_min_mem_mib)
    step = float(np.median(np.diff(s.t)))
    breaks = np.diff(s.t) > 3 * max(step, 1e-9)
    floor = float(np.min(s.power_w)) if s.power_w is not None else None
    out: list[Episode] = []
    i, n = 0, len(s)
    while i < n:
        if not quiet[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and quiet[j + 1] and not breaks[j]:
            j += 1
        if s.t[j] - s.t[i] >= th.zombie_min_s:
            power = None if s.power_w is None else float(np.median(s.power_w[i:j + 1]))
            if power is None or floor is None or power <= th.zombie_power_ratio * max(floor, 1.0):
                out.append(Episode(float(s.t[i]), float(s.t[j]),
                                   float(np.median(s.mem_mib[i:j + 1])), power))
        i = j + 1
    return out


def detect_zombie(job: str, team: str | None, series: list[GpuSeries],
                  th: DetectorThresholds) -> Anomaly | None:
    """One anomaly for the job if any of its GPUs had a zombie episode (the longest shown)."""
    found = [(e, s.key) for s in series for e in zombie_episodes(s, th)]
    if not found:
        return None
    ep, key = max(found, key=lambda x: x[0].duration_s)
    gpus = len({k for _, k in found})
    return Anomaly("zombie", job, team, ep.start, round(ep.duration_s / 60, 1),
                   th.zombie_min_s / 60,
                   f"{gpus} GPU(s) held memory ({ep.mem_mib / 1024:.1f} GiB on {key}) with "
                   f"SM < {th.zombie_sm_pct:g} % for {ep.duration_s / 60:.1f} min",
                   "check the job for a hang or a finished script that did not exit; cancel it")


__all__ = ["Episode", "detect_zombie", "zombie_episodes"]
