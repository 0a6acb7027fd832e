"""Scaling curves: how a job's throughput grows with its data-parallel replicas (STYLE 6).

A curve is a callable ``speedup_fn(k)``: the throughput on ``k`` replicas in units of the
throughput of one replica, so the scaling efficiency is ``η(k) = speedup_fn(k) / k``. The helpers
build common curves: :func:`linear`, :func:`amdahl`, :func:`allreduce` and :func:`table`
(piecewise-linear through measured points).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

SpeedupFn = Callable[[int], float]
"""``speedup_fn(k)``: throughput on ``k`` DP replicas relative to one replica (1.0 at k=1)."""


def linear(k: int) -> float:
    """Perfect scaling: speedup(k) = k, η(k) = 1."""
    return float(k)


@dataclass(frozen=True)
class amdahl:  # lower case: reads as a function, amdahl(0.05)
    """Amdahl scaling: speedup(k) = 1 / (s + (1 − s)/k) for serial (communication) fraction s."""

    serial: float  # s: share of a one-replica step that does not parallelise

    def __call__(self, k: int) -> float:
        if k <= 0:
            return 0.0
        return 1.0 / (self.serial + (1.0 - self.serial) / k)


@dataclass(frozen=True)
class allreduce:  # lower case: reads as a function, allreduce(0.1)
    """Compute + ring all-reduce throughput model: step(k) = compute + comm · 2(k − 1)/k.

    ``comm`` is the all-reduce time of a large ring relative to one replica's compute time, so
    speedup(k) = k · (1 + 0) / (1 + comm · 2(k − 1)/k): linear for small ``comm``, sub-linear then
    saturating as communication dominates (the three regimes of the seed's η(k)).
    """

    comm: float  # all-reduce seconds per compute second (the communication term)

    def __call__(self, k: int) -> float:
        if k <= 0:
            return 0.0
        return k / (1.0 + self.comm * 2.0 * (k - 1) / k)


@dataclass(frozen=True)
class table:  # lower case: reads as a function
    """Piecewise-linear speedup through measured points ``{replicas: speedup}``; flat past the last.

    Example from the seed: 128 GPUs = 1 epoch/h, 256 = 1.8, 512 = 3.2 → ``table({1: 1.0, 2: 1.8,
    4: 3.2})`` with one replica = 128 GPUs.
    """

    points: tuple[tuple[int, float], ...]
    xs: tuple[int, ...] = field(repr=False, compare=False)

    def __init__(self, points: Mapping[int, float]) -> None:
        pts = tuple(sorted((int(k), float(v)) for k, v in points.items()))
        if not pts or pts[0][0] < 1:
            raise ValueError("table() needs points with replicas >= 1")
        object.__setattr__(self, "points", pts)
        object.__setattr__(self, "xs", tuple(p[0] for p in pts))

    def __call__(self, k: int) -> float:
        if k <= 0:
            return 0.0
        xs = self.xs
        i = bisect.bisect_left(xs, k)
        if i < len(xs) and xs[i] == k:
            return self.points[i][1]
        if i == 0:  # below the first point: scale linearly from zero
            return self.points[0][1] * k / xs[0]
        if i == len(xs):  # saturated past the last measured point
            return self.points[-1][1]
        (x0, y0), (x1, y1) = self.points[i - 1], self.points[i]
        return y0 + (y1 - y0) * (k - x0) / (x1 - x0)


__all__ = ["SpeedupFn", "allreduce", "amdahl", "linear", "table"]
