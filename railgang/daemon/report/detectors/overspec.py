"""Over-specified requests (R-Q7 "asked 80 GB, peaked at 35 GB"; R-S10 capability matching).

A job is over-specified when its peak memory on any GPU, plus ``overspec_headroom``, fits a GPU
type with less memory than the one it ran on, and the peak used at most
``overspec_max_peak_share`` of that GPU. The suggestion is the smallest type that fits (ties:
by name), so the answer is deterministic. Only types the fleet has are suggested (``fleet``: the
report's pools): on an all-H100 fleet "request t4" is advice no one can follow, so a job with
nothing smaller to move to is no finding.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.detectors.base import Anomaly

MIB_PER_GIB = 1024.0


def suggest_gpu_type(peak_mib: float, ran_on_gib: float, catalogue: Mapping[str, float],
                     th: DetectorThresholds) -> str | None:
    """The smallest GPU type that holds ``peak`` with headroom and is smaller than the one used."""
    if ran_on_gib <= 0 or peak_mib / MIB_PER_GIB > th.overspec_max_peak_share * ran_on_gib:
        return None
    need = peak_mib / MIB_PER_GIB * (1.0 + th.overspec_headroom)
    fits = sorted((gib, name) for name, gib in catalogue.items() if need <= gib < ran_on_gib)
    return fits[0][1] if fits else None


def detect_overspec(job: str, team: str | None, at: float | None, gpu_type: str,
                    peak_mib: float, catalogue: Mapping[str, float], th: DetectorThresholds,
                    *, total_mib: float | None = None,
                    fleet: Collection[str] | None = None) -> Anomaly | None:
    ran_on = catalogue.get(gpu_type.lower())
    if ran_on is None and total_mib:
        ran_on = total_mib / MIB_PER_GIB
    if ran_on is None:
        return None
    offer = catalogue
    if fleet:  # None or empty: the fleet's types are not known, any catalogued type may do
        have = {t.lower() for t in fleet}
        offer = {name: gib for name, gib in catalogue.items() if name in have}
    smaller = suggest_gpu_type(peak_mib, ran_on, offer, th)
    if smaller is None:
        return None
    return Anomaly("over_specified", job, team, at, round(peak_mib / MIB_PER_GIB, 1),
                   round(th.overspec_max_peak_share * ran_on, 1),
                   f"ran on {gpu_type} ({ran_on:g} GiB), peaked at "
                   f"{peak_mib / MIB_PER_GIB:.1f} GiB",
                   f"request {smaller} ({catalogue[smaller]:g} GiB) or state the need as "
                   f"GPU memory >= {peak_mib / MIB_PER_GIB * (1 + th.overspec_headroom):.0f} GB")


__all__ = ["MIB_PER_GIB", "detect_overspec", "suggest_gpu_type"]
