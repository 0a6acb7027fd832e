"""Sudden fleet-wide utilisation or power drop (R-Q7).

The fleet series is binned (``fleet_bin_s``); a bin is a drop when it is below
``(1 - fleet_drop_fraction)`` x the median of the bins of the preceding ``fleet_baseline_s``
and that median was at least ``fleet_min_util_pct`` of the series' maximum (an idle fleet cannot
drop). Consecutive dropped bins are one anomaly, reported when they last ``fleet_min_drop_s``
(checkpoints of a few jobs that happen to line up dip one bin; that is no fleet event). Power needs no saw-tooth: it is smoothed over
about a second (the H200 recordings), so a real drop shows in it too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.detectors.base import Anomaly


def bin_series(t: Sequence[float] | np.ndarray, v: Sequence[float] | np.ndarray,
               bin_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean of ``v`` per bin of ``bin_s`` seconds (bins without samples left out)."""
    ta, va = np.asarray(t, dtype=np.float64), np.asarray(v, dtype=np.float64)
    if not len(ta):
        return ta, va
    idx = np.floor(ta / bin_s).astype(np.int64)
    keys, inv = np.unique(idx, return_inverse=True)
    sums = np.bincount(inv, weights=va)
    counts = np.bincount(inv)
    return keys.astype(np.float64) * bin_s, sums / counts


def fleet_drops(t: Sequence[float], v: Sequence[float], th: DetectorThresholds, *,
                what: str = "utilisation", unit: str = "%") -> list[Anomaly]:
    """``t``/``v``: already-binned fleet values (e.g. from :func:`bin_series`)."""
    ta, va = np.asarray(t, dtype=np.float64), np.asarray(v, dtype=np.float64)
    if len(ta) < 2:
        return []
    floor = th.fleet_min_util_pct / 100.0 * float(np.max(va))
    out: list[Anomaly] = []
    i = 0
    while i < len(ta):
        base_mask = (ta >= ta[i] - th.fleet_baseline_s) & (ta < ta[i])
        if not base_mask.any():
            i += 1
            continue
        base = float(np.median(va[base_mask]))
        if base <= 0 or base < floor or va[i] >= (1 - th.fleet_drop_fraction) * base:
            i += 1
            continue
        j = i
        while j + 1 < len(ta) and va[j + 1] < (1 - th.fleet_drop_fraction) * base:
            j += 1
        if ta[j] - ta[i] + th.fleet_bin_s < th.fleet_min_drop_s:
            i = j + 1
            continue
        low = float(np.min(va[i:j + 1]))
        drop = 1 - low / base
        out.append(Anomaly(f"fleet_{'power' if what == 'power' else 'util'}_drop", "fleet",
                           None, float(ta[i]), round(drop, 3), th.fleet_drop_fraction,
                           f"fleet {what} fell from {base:,.0f} {unit} to {low:,.0f} {unit} "
                           f"({drop:.0%}) for {(ta[j] - ta[i]) / 60 + th.fleet_bin_s / 60:.0f} min",
                           "check for a power, network or storage event, or a mass job failure"))
        i = j + 1
    return out


__all__ = ["bin_series", "fleet_drops"]
