"""The start-time estimator's memory in the database, so a restarted daemon keeps it: the
run-time history from the ledger, and the calibration scores of the intervals it showed.

:class:`~railgang.daemon.service.estimate.RatioHistory` learns actual/requested run-time ratios
from the jobs it sees leave the running set; that memory dies with the process. The ledger's
``sacct`` ingest keeps every finished job's time limit and the length of its last run
(``jobs.time_limit_s``, ``jobs.run_s``, ``jobs.ended_epoch``: migration 0005), and this module
feeds the newest of them back, oldest first, before the first cycle. Jobs without a time limit
(unlimited) give no ratio; the ledger does not know a job's priority class, so these ratios fill
the account and fleet scopes only.

The calibration's scores (``estimate_calibration.py``) are written as jobs start (table
``estimate_scores``, migration 0006), the newest ``10 × keep`` per cluster kept, and read back
at start like the ratios.
"""

from __future__ import annotations

import logging

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from railgang.daemon.service.estimate import RatioHistory, StartEstimator
from railgang.db.estimates import EstimateScore
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


def stored_scores(s: Session, *, cluster: str, limit: int) -> list[float]:
    """The newest ``limit`` calibration scores of ``cluster``, oldest first."""
    rows = s.scalars(select(EstimateScore.score).where(EstimateScore.cluster == cluster)
                     .order_by(EstimateScore.id.desc()).limit(limit)).all()
    return list(reversed(rows))


def save_scores(s: Session, estimator: StartEstimator, now: float) -> int:
    """Store the scores settled since the last call (the caller commits); keeps the newest
    ``10 × keep`` rows of the cluster. Returns how many were stored."""
    scores = estimator.calibration.drain_new()
    if not scores or not estimator.cluster:
        return 0
    s.add_all([EstimateScore(cluster=estimator.cluster, settled_epoch=int(now), score=x)
               for x in scores])
    s.flush()
    keep = estimator.calibration.keep * 10
    newest = s.scalar(select(func.max(EstimateScore.id))
                      .where(EstimateScore.cluster == estimator.cluster)) or 0
    s.execute(delete(EstimateScore).where(EstimateScore.cluster == estimator.cluster,
                                          EstimateScore.id <= newest - keep))
    return len(scores)


def with_ledger_history(estimator: StartEstimator | None, engine: Engine, *,
                        cluster: str) -> StartEstimator | None:
    """The daemon's estimator with its history and calibration seeded from the database. A
    database that cannot be read costs the estimator that memory (one log line), never the
    daemon's start."""
    if estimator is None:
        return None
    estimator.cluster = cluster
    try:
        with session_scope(engine) as s:
            n = seed_history(estimator.history, s, cluster=cluster,
                             limit=estimator.history.keep * 10)
            k = estimator.calibration.load(stored_scores(s, cluster=cluster,
                                                         limit=estimator.calibration.keep))
    except SQLAlchemyError as exc:
        log.warning("start-time estimate: cannot read run-time history or calibration from the "
                    "database (%s); starting without them", type(exc).__name__)
        return estimator
    log.info("start-time estimate: %d finished jobs' run-time ratios from the ledger, %d "
             "calibration scores", n, k)
    return estimator


__all__ = ["finished_ratios", "save_scores", "seed_history", "stored_scores",
           "with_ledger_history"]
