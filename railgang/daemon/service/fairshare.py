"""The daemon's fair-share input (issue 33 item 4): each account's GPU use lately, decayed.

Finished runs come from the ledger (``usage_records``, one row per run that Slurm's accounting
shows ended; the daemon's feeds ingest them, docs/accounting.md), decayed to now with the
half-life; the running jobs are added from squeue by the core's own arithmetic
(``core/model/fairshare.py: with_recent_use``), as the simulator adds its own. A run that ended
but is not ingested yet counts from the next ingest on (minutes).

The half-life: ``daemon.fair_share_half_life_s`` when set, else Slurm's
``PriorityDecayHalfLife`` from ``scontrol show config``, else Slurm's default (7 days).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from railgang.daemon.core.model.fairshare import SLURM_DEFAULT_HALF_LIFE_S, RecentUse, decayed_run
from railgang.db.models import UsageRecord

log = logging.getLogger("railgang.daemon")

HALF_LIVES = 10  # runs that ended longer ago than this many half-lives count < 0.1 %: not read
_HALF_LIFE = re.compile(r"^\s*PriorityDecayHalfLife\s*=\s*(\S+)", re.MULTILINE)
_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


def parse_half_life(config_text: str) -> float | None:
    """Seconds of ``PriorityDecayHalfLife`` in ``scontrol show config`` output (``7-00:00:00``,
    ``14:00:00``); None when absent or not a duration (0: Slurm decays nothing)."""
    found = _HALF_LIFE.search(config_text)
    if found is None:
        return None
    m = _DURATION.match(found.group(1))
    if m is None:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def half_life(configured: float | None, read_config: Callable[[], str | None] | None) -> float:
    """The half-life the daemon decays with (module docstring); ``read_config`` returns
    ``scontrol show config``'s output or None when Slurm did not answer."""
    if configured is not None:
        return configured
    text = read_config() if read_config is not None else None
    found = parse_half_life(text) if text else None
    if found is None:
        log.info("fair share: no PriorityDecayHalfLife from Slurm; half-life %g s (Slurm's "
                 "default)", SLURM_DEFAULT_HALF_LIFE_S)
        return SLURM_DEFAULT_HALF_LIFE_S
    return found


def _epoch(t: datetime) -> float:
    return (t if t.tzinfo is not None else t.replace(tzinfo=UTC)).timestamp()


def finished_use(session: Session, now: float, half_life_s: float) -> dict[str, float]:
    """Each account's decayed GPU-seconds at ``now`` of the runs the ledger shows ended."""
    q = select(UsageRecord.account, UsageRecord.gpus, UsageRecord.started_at,
               UsageRecord.ended_at).where(UsageRecord.ended_at.is_not(None))
    if half_life_s > 0 and math.isfinite(half_life_s):
        q = q.where(UsageRecord.ended_at >= datetime.fromtimestamp(now - HALF_LIVES * half_life_s, UTC))
    out: dict[str, float] = {}
    for account, gpus, started, ended in session.execute(q):
        if ended is None:  # (the query's own filter)
            continue
        v = decayed_run(gpus, _epoch(started), _epoch(ended), now, half_life_s)
        if v > 0:
            out[account] = out.get(account, 0.0) + v
    return out


def recent_use(session: Session, now: float, half_life_s: float) -> RecentUse:
    return RecentUse(finished_use(session, now, half_life_s), half_life_s)


__all__ = ["HALF_LIVES", "finished_use", "half_life", "parse_half_life", "recent_use"]
