"""Idle reservations, "use it or lose it" (R-Q3): a team with a guarantee that used under 20 %
of it over the last 72 hours is a candidate to hand back to the shared pool. Reclaiming needs an
admin (``railgang quota`` / QuotaEvent ``lose-proposal``); the report only names candidates.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.detectors.base import Anomaly


def idle_reservations(guaranteed_gpus: Mapping[str, int], used_gpu_s: Mapping[str, float],
                      span_s: float, th: DetectorThresholds, *,
                      until: float | None = None) -> list[Anomaly]:
    """``used_gpu_s``: each team's allocated GPU-seconds over the ``span_s`` seconds that end at
    ``until`` (``span_s`` < ``idle_reservation_s`` means too little history: nothing is
    judged). The row states those hours: on a 30-day report they are its last 72, not all."""
    if span_s < th.idle_reservation_s:
        return []
    if until is None:
        hours = f"over the last {span_s / 3600:.0f} h"
    else:
        def stamp(t: float) -> str:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")

        hours = f"from {stamp(until - span_s)} to {stamp(until)} UTC ({span_s / 3600:.0f} h)"
    out = []
    for team, gpus in sorted(guaranteed_gpus.items()):
        if gpus <= 0:
            continue
        share = used_gpu_s.get(team, 0.0) / (gpus * span_s)
        if share < th.idle_reservation_share:
            out.append(Anomaly("idle_reservation", team, team,
                               None if until is None else until - span_s, round(share, 3),
                               th.idle_reservation_share,
                               f"used {share:.0%} of its {gpus}-GPU guarantee {hours}",
                               "use-it-or-lose-it candidate: propose lending the guarantee to "
                               "the shared pool"))
    return out


__all__ = ["idle_reservations"]
