"""The daemon's nightly report job: at ``report.nightly_hour_utc``:05 UTC, build yesterday's
report into ``report.dir/<date>/``. It runs on its own one-thread executor so a slow build never
delays a scheduling cycle; a failure is logged and the daemon carries on."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Engine

from railgang.daemon.config import Settings
from railgang.daemon.report.service import NoReportData, parse_day, report_dir, write_day, yesterday
from railgang.db.session import session_scope
from railgang.errors import RailgangError

log = logging.getLogger("railgang.report")


def run_nightly(engine: Engine, settings: Settings, now: datetime | None = None) -> Path | None:
    """Build yesterday's report (relative to ``now``); returns its folder, None if skipped."""
    root = settings.report.dir
    if root is None:
        return None
    now = now or datetime.now(UTC)
    day = parse_day(yesterday(now))
    out = report_dir(root, day)
    try:
        from railgang.daemon.report.cli import load_fabric_for

        with session_scope(engine) as s:
            rep, files = write_day(s, day, settings.report, out, now=now,
                                   fabric=load_fabric_for(settings))
    except NoReportData as exc:
        log.info("nightly report %s: %s", day.text, exc)
        return None
    except RailgangError as exc:
        log.error("nightly report %s failed: %s", day.text, exc)
        return None
    except Exception as exc:  # the daemon must keep scheduling whatever a report does
        log.exception("nightly report %s failed: %s: %s", day.text, type(exc).__name__, exc)
        return None
    log.info("nightly report %s: %d anomalies, %d files in %s", day.text, len(rep.anomalies),
             len(files), out)
    return out


def schedule_nightly(scheduler: object, engine: Engine, settings: Settings,
                     now: datetime | None = None) -> bool:
    """Add the job to an apscheduler ``BackgroundScheduler`` (when ``report.dir`` is set); its
    first run is at once when yesterday's report is missing."""
    root = settings.report.dir
    if root is None:
        return False
    from apscheduler.executors.pool import ThreadPoolExecutor

    scheduler.add_executor(ThreadPoolExecutor(1), "report")  # type: ignore[attr-defined]
    catch_up = {} if _written(root, now) else {"next_run_time": now or
                                                               datetime.now(UTC)}
    scheduler.add_job(run_nightly, "cron", args=[engine, settings],  # type: ignore[attr-defined]
                      hour=settings.report.nightly_hour_utc, minute=5, timezone=UTC,
                      id="nightly-report", executor="report", coalesce=True,
                      misfire_grace_time=6 * 3600, **catch_up)
    return True


def _written(root: Path, now: datetime | None) -> bool:
    """Whether yesterday's report is in ``root``: a daemon that was down (or installed) at the
    nightly hour builds the missing one at start, not a day late (issue 36 item 1)."""
    day = parse_day(yesterday(now or datetime.now(UTC)))
    return (report_dir(root, day) / "report.json").exists()


__all__ = ["run_nightly", "schedule_nightly"]
