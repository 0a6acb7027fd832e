"""``railgang daemon run``: lead, then run a cycle every ``daemon.cycle_interval_s`` seconds.

1. migrate the database to head (idempotent), 2. take the leader lock — or wait as standby
(``--no-wait``: exit 4), 3. record the leader, serve ``/metrics``, build the backend,
4. run cycles on an apscheduler interval job (one at a time; a late cycle is coalesced, never
stacked), and beside them, each on an executor of its own, the nightly report, the link
collection and the ledger's feeds (sacct ingest, GPU telemetry from Prometheus), 5. on
SIGTERM/SIGINT let the running cycle finish, release the lock, exit 0.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from types import FrameType

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from sqlalchemy import Engine

from railgang.daemon.clock import WallClock
from railgang.daemon.config import Settings
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.cycle_settings import cycle_from, cycle_of
from railgang.daemon.ledger.feed import schedule_feeds
from railgang.daemon.ledger.ingest import Fetch, sacct_fetcher
from railgang.daemon.ledger.progress import StepTimingRecorder
from railgang.daemon.report.nightly import schedule_nightly
from railgang.daemon.service import stop_signal
from railgang.daemon.service.backends import make_backend
from railgang.daemon.service.cycle import DaemonService
from railgang.daemon.service.estimate import start_estimator
from railgang.daemon.service.estimate_history import with_ledger_history
from railgang.daemon.service.fairshare import half_life
from railgang.daemon.service.leader import LeaderLock, lock_for
from railgang.daemon.service.links import LinkCollector
from railgang.daemon.service.metrics import DaemonMetrics, observe_links
from railgang.daemon.service.node_inventory import NodeInventory
from railgang.daemon.service.quotas import QuotaStep
from railgang.daemon.serving.live import LiveServing
from railgang.db import migrate
from railgang.db.repositories import journal as repo
from railgang.db.session import make_engine, session_scope
from railgang.errors import DaemonError, ExitCode, NotLeaderError, SlurmCommandError

log = logging.getLogger("railgang.daemon")


def leader_name() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"


def cycle_config(settings: Settings) -> CycleConfig:
    """The core's knobs from the settings (cycle_settings.cycle_from, which sim --config uses too)."""
    return cycle_from(settings).config


def _install_signals(stop: threading.Event) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread (e.g. in some tests)

    def handler(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %s: finishing the current cycle, then stopping",
                 signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    if stop_signal.REQUESTED.is_set():  # asked while the process was still importing
        log.info("stopped during start-up: not leading, no cycle")
        stop.set()


def _who_leads(settings: Settings) -> str:
    engine = make_engine(settings.db.url)
    try:
        with session_scope(engine) as s:
            row = repo.get_leader(s)
            return f"pid {row.pid} on {row.host}" if row else "unknown process"
    finally:
        engine.dispose()


def _lead(lock: LeaderLock, settings: Settings, wait: bool, stop: threading.Event) -> bool:
    """Take the lock, waiting as standby if asked; False when stopped before leading."""
    announced = False
    while not lock.try_acquire():
        if not wait:
            raise NotLeaderError(f"another railgang daemon is the leader ({_who_leads(settings)}, "
                                 f"{lock.describe()}); stop it or run without --no-wait to "
                                 "stand by")
        if not announced:
            log.info("standby: the leader is %s; taking over when it stops",
                     _who_leads(settings))
            announced = True
        if stop.wait(min(settings.daemon.cycle_interval_s, 5.0)):
            return False
    return True


def run_daemon(settings: Settings, *, once: bool = False, wait: bool = True,
               stop: threading.Event | None = None) -> ExitCode:
    """Run the daemon until stopped (or one cycle with ``once``); returns the exit code."""
    stop = stop or threading.Event()
    _install_signals(stop)
    setup = cycle_from(settings)  # the one place the cycle is built from the file (issue 34)
    policy = setup.policy()
    revision = migrate.upgrade(settings.db.url)
    log.info("database at revision %s", revision)
    engine = make_engine(settings.db.url)
    lock = lock_for(engine)
    metrics = DaemonMetrics()
    links: LinkCollector | None = None
    serving: LiveServing | None = None
    try:
        if not _lead(lock, settings, wait, stop):
            return ExitCode.OK
        clock = WallClock()
        with session_scope(engine) as s:
            repo.set_leader(s, host=os.uname().nodename, pid=os.getpid(),
                            acquired_at=datetime.now(UTC), backend=settings.slurm.backend,
                            policy=policy.name)
        metrics.leader.set(1)
        metrics.watch_reports(settings.report.dir)  # RailgangReportMissing (alerts.yml)
        d = settings.daemon
        if d.metrics_port and not once:
            try:
                port = metrics.serve(d.metrics_port, d.metrics_host)
            except OSError as exc:
                raise DaemonError(f"daemon.metrics_port: cannot serve /metrics on "
                                  f"{d.metrics_host}:{d.metrics_port}: {exc.strerror}; pick "
                                  "another port or 0 to turn it off") from exc
            log.info("metrics on http://%s:%d/metrics", d.metrics_host, port)
        links = LinkCollector(d.links) if d.links.enabled else None
        serving = (LiveServing(settings.serving, clock.now(), d.heartbeat_file.parent / "serving.json")
                   if settings.serving.enabled else None)
        # what each cycle runs, as the simulator builds it: the steps before the core (the
        # failure response, the serving controller), the core's knobs, the policy (issue 34)
        cycle = cycle_of(settings, serving=serving)
        service = DaemonService(
            engine=engine, backend=make_backend(settings, clock.now()), policy=cycle.policy,
            clock=clock, leader=leader_name(), config=cycle.config, seed=d.seed,
            heartbeat_file=d.heartbeat_file, lease_s=settings.slurm.lease_s, metrics=metrics,
            journal_retention_s=d.journal_retention_days * 86400,
            explain_retention_s=d.explain_retention_s, keep_cycles=d.keep_cycles,
            explain_refresh_s=d.explain_refresh_s,
            grants_file=settings.ledger.grants_file,
            estimator=with_ledger_history(start_estimator(d, setup), engine,
                                          cluster=settings.ledger.cluster),
            quotas=QuotaStep(oversubscription=d.quota_oversubscription), links=links,
            steps=(StepTimingRecorder(settings.ledger.cluster,
                                      every_s=settings.ledger.step_timing_every_s)
                   if settings.slurm.backend == "cli" else None),
            inventory=(NodeInventory(settings.ledger.cluster, metrics.observe_nodes_out)
                       if settings.slurm.backend == "cli" else None),
            serving=serving, fair_share_half_life_s=_half_life(settings), pipeline=cycle.steps,
            renew_in_background=settings.slurm.lease_renew_thread and not once)
        log.info("leader: %s, %s backend, policy %s, every %g s", lock.describe(),
                 settings.slurm.backend, policy.name, d.cycle_interval_s)
        if once:
            return ExitCode.OK if _cycle(service) else ExitCode.ERROR
        scheduler = _scheduler(service, engine, settings, metrics, links)
        scheduler.start()
        try:
            stop.wait()
        finally:
            scheduler.shutdown(wait=True)  # the running cycle, if any, finishes first
        log.info("stopped after %d cycles", service.cycles)
        return ExitCode.OK
    finally:
        metrics.leader.set(0)
        metrics.close()
        for part in (links, serving):  # a forecast fit still running is abandoned, not waited for
            if part is not None:
                part.close()
        lock.release()
        engine.dispose()


def _half_life(settings: Settings) -> float | None:
    """The fair-share half-life (service/fairshare.py), None when fair share is off."""
    d = settings.daemon
    if not d.fair_share:
        return None
    read: Callable[[], str | None] | None = None
    if settings.slurm.backend == "cli":
        from railgang.daemon.slurm.cli.runner import SlurmRunner

        def read() -> str | None:
            try:
                res = SlurmRunner.from_settings(settings.slurm).attempt(["scontrol", "show", "config"])
            except SlurmCommandError as exc:
                log.warning("fair share: scontrol show config: %s", exc)
                return None
            return res.stdout if res.ok else None
    return half_life(d.fair_share_half_life_s, read)


def _scheduler(service: DaemonService, engine: Engine, settings: Settings,
               metrics: DaemonMetrics, links: LinkCollector | None) -> BackgroundScheduler:
    """Cycles, and each on an executor of its own: the nightly report, the ledger's feeds and
    the link collection (a slow report, sacct or scrape never delays a cycle)."""
    d = settings.daemon
    scheduler = BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(1), "links": ThreadPoolExecutor(1)},
        job_defaults={"coalesce": True, "max_instances": 1,
                      "misfire_grace_time": max(1, int(d.cycle_interval_s))})
    scheduler.add_job(_cycle, "interval", args=[service], seconds=d.cycle_interval_s,
                      next_run_time=datetime.now(UTC), id="cycle")
    if schedule_nightly(scheduler, engine, settings):  # docs/report.md
        log.info("nightly report into %s at %02d:05 UTC, today's so far every %d s (0: off)",
                 settings.report.dir, settings.report.nightly_hour_utc,
                 settings.report.today_every_s)
    feeds = schedule_feeds(scheduler, engine, settings, metrics, _sacct(settings))
    if feeds:  # the ledger fills itself (docs/deploy.md, step 3)
        log.info("ledger feeds: %s", ", ".join(feeds))
    if links is not None:
        scheduler.add_job(_collect_links, "interval", args=[links, metrics],
                          seconds=d.links.interval_s, id="links", executor="links")
    return scheduler


def _sacct(settings: Settings) -> Fetch | None:
    """sacct for the scheduled ingest; None where the backend has no Slurm behind it."""
    if settings.slurm.backend != "cli":
        return None
    from railgang.daemon.slurm.cli.runner import SlurmRunner

    return sacct_fetcher(SlurmRunner.from_settings(settings.slurm))


def _collect_links(links: LinkCollector, metrics: DaemonMetrics) -> None:
    """One link collection round; a failure is logged and the next round tries again."""
    try:
        result = links.collect()
    except Exception as exc:
        log.error("link collection failed: %s: %s", type(exc).__name__, exc)
        return
    if result is not None:
        observe_links(metrics, result)


def _cycle(service: DaemonService) -> bool:
    """One cycle, logged; a failure is logged and counted, and the daemon carries on."""
    try:
        report = service.run_once()
    except Exception as exc:
        log.error("cycle failed: %s: %s", type(exc).__name__, exc,
                  extra={"fields": {"error": f"{type(exc).__name__}: {exc}"}})
        return False
    log.info("cycle %d", report.cycle_id, extra={"fields": report.as_log()})
    return True


__all__ = ["cycle_config", "leader_name", "run_daemon"]
