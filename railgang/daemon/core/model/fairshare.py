"""Fair share with a half-life: each account's recent GPU use, decayed (issue 33 item 4; pure).

A GPU-second used ``a`` seconds ago counts ``2^(-a / H)`` today, ``H`` the half-life (Slurm's
``PriorityDecayHalfLife``, 7 days unless slurm.conf says otherwise): a team that used little
lately goes first, as under Slurm's fair-share factor, KAI Scheduler's queue order and Kueue's
fair sharing. A run of ``g`` GPUs from ``s`` to ``e`` is, at ``now``,

    g × H / ln 2 × (2^(-(now - e) / H) - 2^(-(now - s) / H))

GPU-seconds (the integral of the decayed use over the run); with ``H`` infinite (or 0: decay
off) it is plain ``g × (e - s)``.

Both worlds build :attr:`Account.recent_gpu_s` with these functions, so they decide alike: the
daemon from the ledger's finished runs plus the running jobs (``service/fairshare.py``), the
simulator from its own accounting (``sim/backend.py``). :func:`usage_rank` is the ordering term
``default`` puts after the Tiresias queue (``policies/default.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from railgang.daemon.core.model.job import RunningJob
from railgang.daemon.core.model.snapshot import Account, Snapshot

SLURM_DEFAULT_HALF_LIFE_S = 7 * 86400.0  # Slurm's PriorityDecayHalfLife when slurm.conf has none
_LN2 = math.log(2.0)


def decay(value: float, age_s: float, half_life_s: float) -> float:
    """``value`` as it counts ``age_s`` seconds later (``half_life_s`` <= 0 or inf: no decay)."""
    if half_life_s <= 0 or math.isinf(half_life_s) or age_s <= 0:
        return value
    return value * math.pow(2.0, -age_s / half_life_s)


def decayed_run(gpus: float, start: float, end: float, now: float, half_life_s: float) -> float:
    """Decayed GPU-seconds at ``now`` of ``gpus`` GPUs held from ``start`` to ``end`` (module
    docstring); 0 for an empty or reversed run. Times after ``now`` count as ``now``."""
    end, start = min(end, now), min(start, now)
    if end <= start or gpus <= 0:
        return 0.0
    if half_life_s <= 0 or math.isinf(half_life_s):
        return gpus * (end - start)
    k = half_life_s / _LN2
    return gpus * k * (math.pow(2.0, -(now - end) / half_life_s) - math.pow(2.0, -(now - start) / half_life_s))


def running_use(running: Iterable[RunningJob], now: float, half_life_s: float) -> dict[str, float]:
    """Decayed GPU-seconds of each account's current runs (their size now, since they started)."""
    out: dict[str, float] = {}
    for r in running:
        acc = r.job.request.account
        out[acc] = out.get(acc, 0.0) + decayed_run(r.gpus, r.start_time, now, now, half_life_s)
    return out


def with_recent_use(snapshot: Snapshot, done: Mapping[str, float], half_life_s: float,
                    ) -> Snapshot:
    """``snapshot`` whose accounts carry ``recent_gpu_s``: ``done`` (each account's finished runs,
    decayed to the snapshot's now) plus its running jobs; an account with use and no row gets one
    (share 1, no quota)."""
    use = dict(done)
    for acc, v in running_use(snapshot.running.values(), snapshot.now, half_life_s).items():
        use[acc] = use.get(acc, 0.0) + v
    accounts = dict(snapshot.accounts)
    for name, v in use.items():
        a = accounts.get(name) or Account(name)
        accounts[name] = Account(a.name, a.share, a.usage_gpu_s, a.quota_gpus, v)
    return snapshot.replace(accounts=accounts)


@dataclass(frozen=True)
class RecentUse:
    """What a backend knows of use that ended: each account's decayed GPU-seconds of finished
    runs as of the snapshot's now, and the half-life (``with_recent_use`` adds the running jobs)."""

    done: Mapping[str, float]
    half_life_s: float


class DecayedUse:
    """Each account's decayed use of finished runs, kept as runs end (the simulator's ledger):
    a value and when it was last brought up to date, decayed on read."""

    __slots__ = ("_at", "_value", "half_life_s")

    def __init__(self, half_life_s: float) -> None:
        self.half_life_s = half_life_s
        self._value: dict[str, float] = {}
        self._at: dict[str, float] = {}

    def add_run(self, account: str, gpu_s: float, start: float, end: float) -> None:
        """A run that ended at ``end``: its ``gpu_s`` spread evenly over ``[start, end]``."""
        if gpu_s <= 0:
            return
        h = self.half_life_s
        span = end - start
        run = decayed_run(gpu_s / span, start, end, end, h) if span > 0 else gpu_s
        self._value[account] = self.at(account, end) + run
        self._at[account] = end

    def seed(self, account: str, value: float, at: float) -> None:
        """Start from a known decayed use at ``at`` (a loaded snapshot's)."""
        if value > 0:
            self._value[account], self._at[account] = value, at

    def at(self, account: str, now: float) -> float:
        v = self._value.get(account, 0.0)
        return decay(v, now - self._at.get(account, now), self.half_life_s) if v else 0.0

    def all_at(self, now: float) -> dict[str, float]:
        return {a: self.at(a, now) for a in self._value}


def usage_rank(account: Account, unit_gpu_s: float = 3600.0) -> int:
    """The ordering term: decayed use per unit of share, in whole GPU-hours, so accounts whose use
    differs by less than one GPU-hour per share tie (and ρ decides). 0 for no use; a share of 0
    or less is unknown and counts as 1."""
    use = account.recent_gpu_s
    if use <= 0:
        return 0
    share = account.share if account.share > 0 else 1.0
    return int(use / share // unit_gpu_s)


__all__ = ["SLURM_DEFAULT_HALF_LIFE_S", "DecayedUse", "RecentUse", "decay", "decayed_run", "running_use",
           "usage_rank", "with_recent_use"]
