"""Synthetic serving demand with the chapter's "human curve" (tests, benchmarks, the demo file).

Replicas needed follow the day: a trough at 03:00, a ramp from 08:00, the peak at 14:00, the
drop at 22:00; weekends run at ``weekend`` of weekdays. On top: multiplicative noise (an AR(1)
process, so neighbouring quarter-hours are alike, as real traffic is), optional holidays (a
weekday that looks like a Sunday) and surges (a multiple of the forecastable demand for a while,
the unforecast event the reactive path must serve). Deterministic for a seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Surge:
    start_s: float
    duration_s: float
    factor: float  # demand multiplied by this while it lasts


@dataclass(frozen=True, slots=True)
class DemandShape:
    low: float  # replicas at the 03:00 trough
    peak: float  # replicas at the 14:00 peak of a weekday
    weekend: float = 0.7  # weekend demand above the trough, relative to a weekday
    noise: float = 0.0  # standard deviation of the multiplicative noise (0.05 = 5 %)
    noise_memory: float = 0.9  # AR(1) coefficient of the noise per step
    holidays: Sequence[int] = ()  # day numbers (0 = the first day, a Monday) run as a Sunday
    surges: Sequence[Surge] = field(default_factory=tuple)


def human_curve(hour: float) -> float:
    """0 at the trough, 1 at the peak: low at night, up from 08:00, peak 14:00, down by 22:30."""
    if hour < 7.5 or hour >= 22.5:
        return 0.05 * (1 + math.cos(2 * math.pi * ((hour - 3) % 24) / 24)) / 2
    if hour < 10:  # the morning ramp
        return 0.05 + 0.75 * (hour - 7.5) / 2.5
    if hour < 18:  # the working day, peaking at 14:00
        return 0.8 + 0.2 * math.cos(math.pi * (hour - 14) / 4)
    return 0.8 - 0.75 * (hour - 18) / 4.5  # the evening decline


def demand_series(shape: DemandShape, days: int, step_s: float, seed: int = 0) -> list[int]:
    """Replicas needed at every ``step_s`` of ``days`` days."""
    rng = random.Random(f"demand:{seed}")
    out: list[int] = []
    eps = 0.0
    for k in range(int(days * DAY_S / step_s)):
        t = k * step_s
        day = int(t // DAY_S)
        weekend = day % 7 >= 5 or day in shape.holidays
        level = human_curve((t % DAY_S) / 3600) * (shape.weekend if weekend else 1.0)
        value = shape.low + (shape.peak - shape.low) * level
        for s in shape.surges:
            if s.start_s <= t < s.start_s + s.duration_s:
                value *= s.factor
        if shape.noise > 0:
            eps = shape.noise_memory * eps + rng.gauss(0, shape.noise) * math.sqrt(
                1 - shape.noise_memory ** 2)
            value *= 1 + eps
        out.append(max(0, round(value)))
    return out


def write_csv(path: Path, deployments: Sequence[tuple[str, int, float, list[int]]],
              step_s: float, max_replicas: Mapping[str, int] | None = None) -> None:
    """A demand file (``model.py``'s format): (name, tp, switch_in_s, replicas per step); one
    row per change only; ``max_replicas`` sizes pools above the peak demand."""
    pools = max_replicas or {}
    lines = ["time_s,deployment,replicas,tp,switch_in_s,max_replicas"]
    for name, tp, switch_in, values in deployments:
        last = None
        for k, v in enumerate(values):
            if v != last:
                extra = (f"{switch_in:g},{pools.get(name, '')}" if last is None
                         else ",")
                lines.append(f"{k * step_s:g},{name},{v},{tp},{extra}")
                last = v
    path.write_text("\n".join(lines) + "\n")


__all__ = ["DemandShape", "Surge", "demand_series", "human_curve", "write_csv"]
