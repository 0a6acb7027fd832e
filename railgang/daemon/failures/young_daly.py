"""Checkpoint advice: the Young–Daly interval and the waste it leaves (pure arithmetic).

A job that writes a checkpoint costing ``C`` seconds every ``τ`` seconds and fails on average
every ``M`` seconds wastes, to first order (Young 1974, Daly 2006),

    waste(τ) = C / τ + (τ / 2 + R) / M

of its wall time: the checkpoints themselves, half an interval of lost work per failure, and the
restart ``R`` (reload, warm-up, requeue). ``τ* = sqrt(2 × C × M)`` minimises it. The formula holds
while ``τ`` is well below ``M``; past that the job rarely reaches a checkpoint, and the advice is
capped at ``M`` (never checkpoint less often than the job fails).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["CheckpointAdvice", "advise", "render_advice", "waste", "young_daly_s"]


def young_daly_s(checkpoint_cost_s: float, mtbf_s: float) -> float:
    """``sqrt(2 × C × M)``, capped at ``M``; ``inf`` when nothing fails (``M`` infinite).

    Raises ``ValueError`` for a negative or NaN cost or a non-positive MTBF.
    """
    if not checkpoint_cost_s >= 0 or math.isinf(checkpoint_cost_s):
        raise ValueError(f"checkpoint cost {checkpoint_cost_s!r} s: expected a finite number >= 0")
    if not mtbf_s > 0:
        raise ValueError(f"MTBF {mtbf_s!r} s: expected a number > 0")
    if math.isinf(mtbf_s):
        return math.inf
    return min(math.sqrt(2.0 * checkpoint_cost_s * mtbf_s), mtbf_s)


def waste(interval_s: float, checkpoint_cost_s: float, mtbf_s: float, restart_s: float) -> float:
    """First-order share of wall time lost to checkpoints, lost work and restarts, in [0, 1]."""
    if interval_s <= 0:
        return 1.0
    ckpt = 0.0 if math.isinf(interval_s) else checkpoint_cost_s / interval_s
    failures = 0.0 if math.isinf(mtbf_s) else (interval_s / 2.0 + restart_s) / mtbf_s
    total = ckpt + failures
    return 1.0 if math.isnan(total) else min(1.0, total)


@dataclass(frozen=True, slots=True)
class CheckpointAdvice:
    """What ``railgang explain`` shows and the training helper receives."""

    mtbf_s: float  # mean time between failures hitting the job's nodes
    interval_s: float  # the Young–Daly interval
    waste: float  # first-order waste at the advised interval
    current_interval_s: float | None  # the job's own interval, when known
    current_waste: float | None  # first-order waste at the job's own interval

    def render(self) -> str:
        return render_advice(self.as_dict())

    def as_dict(self) -> dict[str, float | None]:
        """JSON-safe (``None`` for infinity): what an explanation row stores."""
        def num(x: float | None) -> float | None:
            return None if x is None or math.isinf(x) else round(x, 4)

        return {"mtbf_s": num(self.mtbf_s), "interval_s": num(self.interval_s),
                "waste": num(self.waste), "current_interval_s": num(self.current_interval_s),
                "current_waste": num(self.current_waste)}


def _dur(s: float | None) -> str:
    if s is None:
        return "never"
    return f"{s / 3600:.1f} h" if s >= 5400 else f"{s / 60:.0f} min"


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def render_advice(d: object) -> str:
    """One line from :meth:`CheckpointAdvice.as_dict` (stored data: anything else is '')."""
    if not isinstance(d, dict):
        return ""
    interval, mtbf, lost = _num(d.get("interval_s")), _num(d.get("mtbf_s")), _num(d.get("waste"))
    if lost is None:
        return ""
    text = (f"checkpoint every {_dur(interval)} (Young-Daly; failures every {_dur(mtbf)} on "
            f"these nodes, {lost:.1%} of wall time lost)")
    current, current_lost = _num(d.get("current_interval_s")), _num(d.get("current_waste"))
    if current is not None and current_lost is not None:
        text += f"; now every {_dur(current)}: {current_lost:.1%} lost"
    return text


def advise(mtbf_s: float, checkpoint_cost_s: float, restart_s: float,
           current_interval_s: float | None = None) -> CheckpointAdvice:
    """The advised interval for a job with this MTBF, checkpoint cost and restart time."""
    interval = young_daly_s(checkpoint_cost_s, mtbf_s)
    current = None
    if current_interval_s is not None and current_interval_s > 0:
        current = waste(current_interval_s, checkpoint_cost_s, mtbf_s, restart_s)
    return CheckpointAdvice(mtbf_s=mtbf_s, interval_s=interval,
                            waste=waste(interval, checkpoint_cost_s, mtbf_s, restart_s),
                            current_interval_s=current_interval_s if current is not None else None,
                            current_waste=current)
