"""The report's drill-downs: per user, failed and cancelled jobs, wait by team, and the trend
of the last days (pure: from :class:`ReportInputs`)."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

import numpy as np

from railgang.daemon.report.data import DAY_S, TREND_DAYS, ReportInputs
from railgang.daemon.report.model import EndedRow, TeamWaitRow, Trend, UserRow


def _h(gpu_s: float | None) -> float | None:
    return None if gpu_s is None else round(gpu_s / 3600, 3)


def user_rows(inputs: ReportInputs, teams: frozenset[str] | None = None) -> list[UserRow]:
    rows = [UserRow(r["user"] or "(unknown)", r["team"], round(r["gpu_seconds"] / 3600, 3),
                    _h(r["compute_gpu_seconds"]), _h(r["productive_gpu_seconds"]),
                    round(r["cost"], 2))
            for r in inputs.usage_user if teams is None or r["team"] in teams]
    return sorted(rows, key=lambda u: (-u.allocated_gpu_h, u.team, u.user))


def ended_rows(inputs: ReportInputs) -> list[EndedRow]:
    return [EndedRow(e.job, e.team, e.user, e.gpus, e.state, e.ended,
                     round(e.gpu_seconds / 3600, 3)) for e in inputs.ended]


def _q(values: list[float], q: float) -> float | None:
    return None if not values else round(float(np.percentile(values, q)), 1)


def team_waits(inputs: ReportInputs) -> list[TeamWaitRow]:
    """Wait (submit to first start) of the jobs that started in the window, per team, and the
    jobs still waiting at its end."""
    waits: dict[str, list[float]] = defaultdict(list)
    waiting: dict[str, int] = defaultdict(int)
    for j in inputs.queue:
        if j.first_start is not None and inputs.since <= j.first_start < inputs.until:
            waits[j.team].append(j.first_start - j.submitted)
        if j.submitted < inputs.until and (j.first_start is None or
                                           j.first_start >= inputs.until):
            waiting[j.team] += 1
    return [TeamWaitRow(t, len(waits[t]), _q(waits[t], 50), _q(waits[t], 90),
                        round(max(waits[t]), 1) if waits[t] else None, waiting[t])
            for t in sorted(set(waits) | set(waiting))]


def trend(inputs: ReportInputs, capacity_gpus: int) -> Trend:
    """Allocated GPU-hours per UTC day for the days ending with the window's last day (read
    per day from the ledger: ``data.load_daily``), per team and for the fleet, and the fleet's
    share of the window's capacity per day (of the hours so far, on a day not over yet)."""
    days = max((len(v) for v in inputs.daily.values()), default=TREND_DAYS)
    last = (inputs.until - 1) // DAY_S * DAY_S  # the midnight the window's last day began
    dates = [datetime.fromtimestamp(last - k * DAY_S, UTC).date().isoformat()
             for k in range(days - 1, -1, -1)]
    teams = {t: [round(x, 3) for x in v] for t, v in sorted(inputs.daily.items())}
    fleet = [round(sum(v[i] for v in inputs.daily.values()), 3) for i in range(days)]
    caps = [capacity_gpus * 24.0] * (days - 1) + [capacity_gpus * (inputs.until - last) / 3600]
    pct = [round(100 * f / cap, 2) if cap else None for f, cap in zip(fleet, caps, strict=True)]
    return Trend(dates, fleet, pct, teams)


__all__ = ["ended_rows", "team_waits", "trend", "user_rows"]
