"""A team at 3x its usual use (R-Q7): today's GPU-hours over the median of its earlier days.

"Usual" is the median over the days of the last ``surge_history_days`` on which the team used
GPUs at all (a team that works weekdays is not "usual" at zero on Sundays); at least
``surge_min_history_days`` such days are needed, and teams under ``surge_min_gpu_hours`` today
are not judged (1 GPU-hour against 0.2 is no anomaly).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import median

from railgang.daemon.report.config import DetectorThresholds
from railgang.daemon.report.detectors.base import Anomaly


def team_surges(today: Mapping[str, float], history: Mapping[str, Sequence[float]],
                th: DetectorThresholds) -> list[Anomaly]:
    """``today``: GPU-hours per team; ``history``: the team's GPU-hours of each earlier day."""
    out = []
    for team, used in sorted(today.items()):
        past = [h for h in history.get(team, ())[-th.surge_history_days:] if h > 0]
        if used < th.surge_min_gpu_hours or len(past) < th.surge_min_history_days:
            continue
        usual = median(past)
        if usual > 0 and used >= th.surge_ratio * usual:
            out.append(Anomaly("team_surge", team, team, None, round(used / usual, 2),
                               th.surge_ratio,
                               f"{used:,.0f} GPU-h today against a usual {usual:,.0f} GPU-h "
                               f"(median of {len(past)} days)",
                               "confirm the burst is intended; it may be borrowing others' "
                               "guarantee"))
    return out


__all__ = ["team_surges"]
