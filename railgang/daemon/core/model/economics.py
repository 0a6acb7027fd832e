"""The seed's fleet-economics formulas (chapter 8), as small pure functions.

- :func:`preemption_tax` — lost work since the last checkpoint + save + reload + warm-up, priced
  per GPU-hour (R-S8: 15 + 20 + 10 min on 64 GPUs at $2/GPU-h = $96 per event).
- :func:`completion_time_h` — when a job of ``work_h`` full-speed hours finishes under a piecewise
  rate schedule (elastic 32→64→128 ≈ 26.5 h versus rigid 8 h wait + 24 h = 32 h).
- :func:`work_in_window` — work done in a window under a piecewise rate schedule, paying a resize
  cost each time a running job changes rate (24 / 64 / 39.7 epochs over 24 h).
- :func:`spot_effective_cost` — C_eff = C_spot × T_total / T_productive (R-S9).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Phase = tuple[float, float]
"""(start hour, rate) — rate in full-speed units per hour; a schedule is sorted by start."""


def preemption_tax(gpus: int, lost_min: float, save_min: float, reload_min: float,
                   warmup_min: float, usd_per_gpu_h: float) -> float:
    """Dollars burnt by one preemption event."""
    return gpus * (lost_min + save_min + reload_min + warmup_min) / 60.0 * usd_per_gpu_h


def completion_time_h(work_h: float, schedule: Sequence[Phase]) -> float:
    """Hours until ``work_h`` of full-speed work is done under the rate ``schedule``."""
    done = 0.0
    for i, (start, rate) in enumerate(schedule):
        end = schedule[i + 1][0] if i + 1 < len(schedule) else float("inf")
        if rate > 0 and done + rate * (end - start) >= work_h:
            return start + (work_h - done) / rate
        done += rate * (end - start)
    return float("inf")


def work_in_window(window_h: float, schedule: Sequence[Phase], resize_cost_h: float = 0.0) -> float:
    """Work done in ``[0, window_h)``; each change between two non-zero rates costs a pause of
    ``resize_cost_h`` (checkpoint, reshard, restart) at the start of the new phase."""
    done = 0.0
    for i, (start, rate) in enumerate(schedule):
        end = min(schedule[i + 1][0], window_h) if i + 1 < len(schedule) else window_h
        pause = resize_cost_h if i > 0 and schedule[i - 1][1] > 0 and rate > 0 else 0.0
        done += rate * max(0.0, end - start - pause)
    return done


@dataclass(frozen=True)
class SpotCost:
    hours: float  # wall-clock hours including overheads
    usd: float


def interrupted_overhead(checkpoint_overhead: float, interruptions_per_day: float,
                         restart_s: float) -> float:
    """T_total / T_productive on capacity that is reclaimed ``interruptions_per_day`` times a
    day: 1 + the checkpoints' share + each interruption's restart (R-S9). The one formula of
    the effective cost: ``tiers.overhead`` (routing) and :func:`spot_effective_cost` use it."""
    return 1.0 + checkpoint_overhead + interruptions_per_day * restart_s / 86400.0


def spot_effective_cost(gpus: int, productive_h: float, usd_per_gpu_h: float, *,
                        checkpoint_overhead: float, interruptions_per_day: float,
                        restart_h: float) -> SpotCost:
    """C_eff = C × T_total / T_productive with T_total = productive + checkpoints + restarts."""
    total_h = productive_h * interrupted_overhead(checkpoint_overhead, interruptions_per_day,
                                                  restart_h * 3600.0)
    return SpotCost(total_h, gpus * total_h * usd_per_gpu_h)


__all__ = ["Phase", "SpotCost", "completion_time_h", "interrupted_overhead", "preemption_tax",
           "spot_effective_cost",
           "work_in_window"]
