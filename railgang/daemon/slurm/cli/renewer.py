"""Lease renewal off the cycle's path: a thread of its own sends the renewals a cycle found due,
in batches, while the cycle goes on (issue 37 item 3).

``scontrol update jobid=A,B,... StartTime=...`` is one process but still one slurmctld RPC per
job id (22.05-26.05: scontrol loops over the list), so renewing 1,250 leases costs 2-3 s however
they are batched; on the cycle's thread those seconds were the cycle's. Here a cycle only hands
the ids over (``submit``) and reads what the batches since renewed or had refused (``take``).

Two rules keep it safe:

- A Start or a release ends a lease; a renewal of the same job that reached slurmctld after it
  would set the lease again (the job would wait ``lease_s`` more). ``withhold(ids)`` drops
  ``ids`` from the queue and returns once none of them is in the batch in flight. The backend
  calls it before it sends Starts or releases, and only the cycle's thread submits, so nothing
  puts them back before they are sent. A Start waits at most for one batch (``BATCH`` ids, about
  0.2-0.4 s), and only when its own job is in it; never for the whole renewal.
- No lease is set past the moment it is sent plus ``lease_s``: a batch's lease end is the
  cycle's clock at the last hand-over plus the time since, so a dead daemon's jobs still run
  natively within ``lease_s``. Ids queue in the order handed over (the due list puts the leases
  ending soonest first), and one handed over again keeps its place.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

log = logging.getLogger("railgang.daemon.slurm")

BATCH = 100  # ids per scontrol: what a Start may have to wait for
Send = Callable[[list[str], float], dict[str, str]]  # (ids, now) -> {job id: why refused}


class LeaseRenewer:
    """Renews handed-over leases on a daemon thread, started at the first ``submit``."""

    def __init__(self, send: Send, *, batch: int = BATCH,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._send, self._batch, self._monotonic = send, max(1, batch), monotonic
        self._cv = threading.Condition()  # guards everything below
        self._flight: set[str] = set()  # the batch being sent
        self._queue: dict[str, None] = {}  # ordered set of ids to renew
        self._clock: tuple[float, float] = (0.0, 0.0)  # (cycle's now, monotonic) at the last hand-over
        self._renewed = 0
        self._refused: dict[str, str] = {}
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, job_ids: Sequence[str], now: float) -> None:
        """Queue ``job_ids`` for renewal to about ``now + lease_s``; returns at once."""
        with self._cv:
            if self._closed:
                return
            self._clock = (now, self._monotonic())
            for j in job_ids:
                self._queue.setdefault(j, None)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="railgang-leases", daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def take(self) -> tuple[int, dict[str, str]]:
        """(leases renewed, {job id: why refused}) since the last call."""
        with self._cv:
            done, refused = self._renewed, self._refused
            self._renewed, self._refused = 0, {}
            return done, refused

    def pending(self) -> int:
        with self._cv:
            return len(self._queue) + len(self._flight)

    def withhold(self, job_ids: Sequence[str]) -> None:
        """Wait out the batch in flight, then drop ``job_ids`` from the queue: after this no
        renewal of them reaches slurmctld unless they are submitted again."""
        if not job_ids:
            return
        ids = set(job_ids)
        with self._cv:
            for j in ids:
                self._queue.pop(j, None)
            self._cv.wait_for(lambda: not (self._flight & ids))

    def flush(self, timeout_s: float) -> bool:
        """Wait until every queued lease was sent; False when ``timeout_s`` ran out first."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._queue and not self._flight, timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the thread; what is still queued is dropped (those leases end on their own)."""
        with self._cv:
            self._closed = True
            self._queue.clear()
            self._cv.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: bool(self._queue) or self._closed)
                if self._closed:
                    return
                batch = list(self._queue)[:self._batch]
                for j in batch:
                    del self._queue[j]
                self._flight = set(batch)
                now, at = self._clock
            refused = self._send_batch(batch, now + max(0.0, self._monotonic() - at))
            with self._cv:
                self._renewed += len(batch) - len(refused)
                self._refused.update(refused)
                self._flight = set()
                self._cv.notify_all()

    def _send_batch(self, batch: list[str], now: float) -> dict[str, str]:
        if not batch:
            return {}
        try:
            return self._send(batch, now)
        except Exception as exc:  # the thread must outlive one bad batch; the next cycle retries
            log.warning("slurm: renewing %d leases (first %s): %s: %s", len(batch), batch[0],
                        type(exc).__name__, exc)
            return {j: f"{type(exc).__name__}: {exc}" for j in batch}


__all__ = ["BATCH", "LeaseRenewer"]
