"""A small per-process cache for the ledger's aggregations (usage, chargeback, utilisation).

An aggregation over a window that has ended (``until`` not after now) depends only on the
database, so its answer is kept under (query, ledger version) for ``api.cache_seconds``. The
version (:func:`ledger_version`) is read on every request with four index lookups: the newest
segment id, the newest ingest (``ledger_watermarks.updated_at``, written by every ingest window,
also when it only closes or changes segments), the newest GPU sample (telemetry, which sets the
segments' compute and productive fractions) and the newest admin change (``audit_log``: rates,
accounts). A change none of them shows (e.g. a script writing segments without an ingest) is
seen after at most ``cache_seconds``. Windows reaching past now are never cached: their open
segments count up to now.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from railgang.db.ledger import GpuSample, LedgerWatermark
from railgang.db.models import UsageRecord
from railgang.db.org import AuditEntry


def ledger_version(s: Session) -> tuple[Any, ...]:
    row = s.execute(select(select(func.max(UsageRecord.id)).scalar_subquery(),
                           select(func.max(LedgerWatermark.updated_at)).scalar_subquery(),
                           select(func.max(GpuSample.at_epoch_ms)).scalar_subquery(),
                           select(func.max(AuditEntry.id)).scalar_subquery())).one()
    return tuple(row)


class TtlCache:
    """Thread-safe LRU of at most ``entries`` answers, each fresh for ``seconds`` (0: off).

    One computation per key at a time: requests that miss while it runs wait for its answer
    instead of each running the aggregation (a herd of them, each 30-50 ms of SQL, set the API's
    p99 at 150-200 req/s), and an expired answer is served while one request refreshes it (its
    key holds the ledger's version, so it is still this version's answer; the expiry only
    bounds how long a change that no version column shows stays unseen). A computation that
    fails leaves the waiters to compute their own."""

    def __init__(self, seconds: float, entries: int) -> None:
        self.seconds, self.entries = seconds, entries
        self._items: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._running: dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        if self.seconds <= 0:
            return compute()
        with self._lock:
            hit = self._items.get(key)
            running = self._running.get(key)
            if hit is not None and (hit[0] > time.monotonic() or running is not None):
                self._items.move_to_end(key)
                return hit[1]  # fresh, or stale while another request refreshes it
            if running is None:
                self._running[key] = threading.Event()
        if running is not None:  # a miss while another request computes it: wait for it
            running.wait()
            with self._lock:
                hit = self._items.get(key)
            if hit is not None:
                return hit[1]
            return compute()  # that computation failed (or was evicted at once)
        try:
            value = compute()
            with self._lock:
                self._items[key] = (time.monotonic() + self.seconds, value)
                self._items.move_to_end(key)
                while len(self._items) > self.entries:
                    self._items.popitem(last=False)
        finally:
            with self._lock:
                self._running.pop(key).set()
        return value


__all__ = ["TtlCache", "ledger_version"]
