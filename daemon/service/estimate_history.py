"""The start-time estimator's run-time history from the ledger, so a restarted daemon keeps it.

:class:`~railgang.daemon.service.estimate.RatioHistory` learns actual/requested run-time ratios
from the jobs it sees leave the running set; that memory dies with the process. The ledger's
``sacct`` ingest keeps every finished job's time limit and the length of its last run
(``jobs.time_limit_s``, ``jobs.run_s``, ``jobs.ended_epoch``: migration 0005), and this module
feeds the newest of them back, oldest first, before the first cycle. Jobs without a time limit
(unlimited) give no ratio; the ledger does not know a job's priority class, so these ratios fill
the account and fleet scopes only.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from railgang.daemon.service.estimate import RatioHistory, StartEstimator
from railgang.db.models import Job
from railgang.db.session import session_scope

log = logging.getLogger(__name__)


def finished_ratios(s: Session, *, cluster: str, limit: int) -> list[tuple[str, float]]:
    """(account, run time / time limit) of the newest ``limit`` finished jobs, oldest first."""
    rows = s.execute(
        select(Job.account, Job.run_s, Job.time_limit_s)
        .where(Job.cluster == cluster, Job.run_s.is_not(None), Job.time_limit_s > 0,
               Job.ended_epoch.is_not(None))
        .order_by(Job.ended_epoch.desc(), Job.id.desc()).limit(limit)).all()
    return [(account, run / lim) for account, run, lim in reversed(rows) if run and lim]


def seed_history(history: RatioHistory, s: Session, *, cluster: str, limit: int = 5000) -> int:
    """Add the ledger's ratios to ``history``; returns how many were added."""
    ratios = finished_ratios(s, cluster=cluster, limit=limit)
    for account, ratio in ratios:
        history.add(account, None, ratio)
    return len(ratios)


def with_ledger_history(estimator: StartEstimator | None, engine: Engine, *,
                        cluster: str) -> StartEstimator | None:
    """The daemon's estimator with its history seeded from the ledger. A database that cannot
    be read costs the estimator its history (one log line), never the daemon's start."""
    if estimator is None:
        return None
    try:
        with session_scope(engine) as s:
            n = seed_history(estimator.history, s, cluster=cluster,
                             limit=estimator.history.keep * 10)
    except SQLAlchemyError as exc:
        log.warning("start-time estimate: cannot read run-time history from the ledger (%s); "
                    "starting without it", type(exc).__name__)
        return estimator
    log.info("start-time estimate: %d finished jobs' run-time ratios from the ledger", n)
    return estimator


__all__ = ["finished_ratios", "seed_history", "with_ledger_history"]
