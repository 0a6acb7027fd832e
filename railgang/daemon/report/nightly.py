"""The daemon's report jobs: at ``report.nightly_hour_utc``:05 UTC, build yesterday's report
into ``report.dir/<date>/``; every ``report.today_every_s``, today's so far into
``report.dir/<today>/`` (marked partial: the window ends when it was built), which that night's
run overwrites with the whole day. Both run on one one-thread executor of their own, so a slow
build never delays a scheduling cycle and the two never write at once; a failure is logged and
the daemon carries on."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine

from railgang.daemon.config import Settings
from railgang.daemon.report.service import NoReportData, parse_day, report_dir, write_day, yesterday
from railgang.db.session import session_scope
from railgang.errors import RailgangError

log = logging.getLogger("railgang.report")


def run_nightly(engine: Engine, settings: Settings, now: datetime | None = None) -> Path | None:
    """Build yesterday's report (relative to ``now``); returns its folder, None if skipped."""
    now = now or datetime.now(UTC)
    return _build(engine, settings, yesterday(now), now, "nightly report")


def run_today(engine: Engine, settings: Settings, now: datetime | None = None) -> Path | None:
    """Build today's report so far (up to ``now``); returns its folder, None if skipped."""
    now = now or datetime.now(UTC)
    return _build(engine, settings, now.astimezone(UTC).date().isoformat(), now,
                  "today's report")


def _build(engine: Engine, settings: Settings, text: str, now: datetime,
           what: str) -> Path | None:
    root = settings.report.dir
    if root is None:
        return None
    day = parse_day(text)
    out = report_dir(root, day)
    try:
        from railgang.daemon.report.cli import load_fabric_for

        with session_scope(engine) as s:
            rep, files = write_day(s, day, settings.report, out, now=now,
                                   fabric=load_fabric_for(settings))
    except NoReportData as exc:
        log.info("%s %s: %s", what, day.text, exc)
        return None
    except RailgangError as exc:
        log.error("%s %s failed: %s", what, day.text, exc)
        return None
    except Exception as exc:  # the daemon must keep scheduling whatever a report does
        log.exception("%s %s failed: %s: %s", what, day.text, type(exc).__name__, exc)
        return None
    log.info("%s %s: %d anomalies, %d files in %s", what, day.text, len(rep.anomalies),
             len(files), out)
    return out


def schedule_nightly(scheduler: object, engine: Engine, settings: Settings,
                     now: datetime | None = None) -> bool:
    """Add the jobs to an apscheduler ``BackgroundScheduler`` (when ``report.dir`` is set): the
    nightly one, first run at once when yesterday's report is missing, and today's so far
    (``report.today_every_s``, 0 = off), first run at once."""
    root = settings.report.dir
    if root is None:
        return False
    from apscheduler.executors.pool import ThreadPoolExecutor

    now = now or datetime.now(UTC)
    scheduler.add_executor(ThreadPoolExecutor(1), "report")  # type: ignore[attr-defined]
    catch_up = {} if _written(root, now) else {"next_run_time": now}
    scheduler.add_job(run_nightly, "cron", args=[engine, settings],  # type: ignore[attr-defined]
                      hour=settings.report.nightly_hour_utc, minute=5, timezone=UTC,
                      id="nightly-report", executor="report", coalesce=True,
                      misfire_grace_time=6 * 3600, **catch_up)
    every = settings.report.today_every_s
    if every > 0:
        scheduler.add_job(run_today, "interval",  # type: ignore[attr-defined]
                          args=[engine, settings], seconds=every, next_run_time=now,
                          id="today-report", executor="report", coalesce=True,
                          max_instances=1, misfire_grace_time=every)
    return True


def whole_day(folder: Path) -> bool:
    """Whether ``folder`` (``<root>/<YYYY-MM-DD>``) holds a report of its whole day: one written
    after the day ended. Today's so far is rewritten during the day, and yesterday's last one
    stays until the nightly run replaces it: neither is the nightly report. A stat, not a read
    of the JSON: the metrics gauge asks at every scrape."""
    try:
        end = datetime.combine(date.fromisoformat(folder.name) + timedelta(days=1),
                               datetime.min.time(), UTC)
    except ValueError:  # not a day's folder (a range written by hand): as before
        return folder.is_dir()
    try:
        return (folder / "report.json").stat().st_mtime >= end.timestamp()
    except OSError:
        return False


def _written(root: Path, now: datetime) -> bool:
    """Whether yesterday's whole-day report is in ``root``: a daemon that was down (or
    installed) at the nightly hour builds the missing one at start, not a day late (issue 36
    item 1)."""
    return whole_day(report_dir(root, parse_day(yesterday(now))))


__all__ = ["run_nightly", "run_today", "schedule_nightly", "whole_day"]
