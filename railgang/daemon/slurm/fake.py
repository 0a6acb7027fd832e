"""``FakeBackend``: an in-memory backend for unit tests of the loop (httpx ``MockTransport`` style).

It serves snapshots from a callable (or a fixed snapshot) and records every action it is asked to
apply; ``refuse`` lets a test make chosen actions fail, as a real cluster sometimes does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from railgang.daemon.backend import ActionResult
from railgang.daemon.core.model.actions import Action
from railgang.daemon.core.model.snapshot import Snapshot


class FakeBackend:
    def __init__(self, snapshot: Snapshot | Callable[[float], Snapshot],
                 refuse: Callable[[Action], str | None] | None = None) -> None:
        self._snapshot = snapshot
        self._refuse = refuse
        self.applied: list[tuple[float, Action]] = []
        self.observed: list[float] = []

    def snapshot(self, now: float) -> Snapshot:
        self.observed.append(now)
        snap = self._snapshot
        return snap(now) if callable(snap) else snap.replace(now=now)

    def apply(self, actions: Sequence[Action], now: float) -> list[ActionResult]:
        results = []
        for action in actions:
            problem = self._refuse(action) if self._refuse else None
            if problem is None:
                self.applied.append((now, action))
            results.append(ActionResult(action, problem is None, problem or ""))
        return results


__all__ = ["FakeBackend"]
