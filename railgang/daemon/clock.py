"""The one injected clock. The daemon reads wall time; the simulator advances its own.

Nothing in railgang calls ``time.time()`` for a scheduling decision: the loop asks its ``Clock``
and hands ``now`` to the pure core, so the same code runs live, in the simulator and in tests.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (real) or since the trace start (simulated)."""
        ...


class WallClock:
    """Real time, for the daemon."""

    def now(self) -> float:
        return time.time()


class SimClock:
    """Simulated time: only the discrete-event engine (or a test) moves it, and only forward."""

    __slots__ = ("_now",)

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> None:
        if t < self._now:
            raise ValueError(f"simulated time cannot go back: {t} < {self._now}")
        self._now = float(t)

    def advance(self, dt: float) -> None:
        self.advance_to(self._now + dt)


__all__ = ["Clock", "SimClock", "WallClock"]
