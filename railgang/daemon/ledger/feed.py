"""The ledger feeds itself (issue 36 item 1): the daemon reads sacct and GPU telemetry on a
schedule, so a site that installed railgang gets a ledger without a hand-run command.

* :class:`SacctFeed` is ``railgang ledger ingest`` on a timer: from the watermark (minus
  ``ledger.overlap_s``) to now, in windows of ``ledger.window_s``, one transaction each, so it
  is exactly-once in the same way (a window is upserted by key and moves the watermark in the
  same commit; a manual ingest beside it rewrites the same rows).
* :class:`TelemetryFeed` asks a Prometheus that scrapes the DCGM exporter for its GPU series
  (``/api/v1/query_range``, through the reader ``serving fetch`` uses) since its own watermark,
  stores them as GPU samples and attributes them to the segments they fall in, as
  ``railgang ledger telemetry FILE --format dcgm`` does for a file.

Each run is hostile-edge code on its own executor: Slurm, the database or Prometheus being
unreachable, or an answer that is garbage, is one warning and a counted error; the next run
tries again from the same watermark, and no scheduling cycle ever waits on it or fails with it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from railgang.daemon.config import LedgerSettings
from railgang.daemon.ledger.ingest import Fetch, default_since, ingest_window, source_name
from railgang.daemon.ledger.telemetry import Sample, attribute, store_samples
from railgang.db.repositories import ledger as repo
from railgang.db.session import session_scope
from railgang.errors import RailgangError

log = logging.getLogger("railgang.ledger")

# the DCGM exporter's series the ledger keeps: utilisation (GPU_UTIL in %, the profiling
# GR_ENGINE_ACTIVE as a ratio; the latter wins where both are exported), memory used, power
UTIL = {"DCGM_FI_DEV_GPU_UTIL": 1.0, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 100.0}
MEMORY, POWER = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"
MAX_TELEMETRY_SERIES = 200_000  # 25,000 nodes x 8 GPUs; the answer's byte bound comes first
SCRAPE_LAG_S = 60  # a window ends this long before now: Prometheus has not scraped the last bit


class FeedMetrics(Protocol):
    """What a feed reports (``DaemonMetrics.ledger_read``); tests pass a recorder."""

    def ledger_read(self, source: str, ok: bool, watermark: datetime | None) -> None: ...


def _warn(what: str, exc: BaseException) -> None:
    text = str(exc).splitlines()[0][:300] if str(exc).strip() else ""
    detail = text if isinstance(exc, RailgangError) else f"{type(exc).__name__}: {text}"
    log.warning("%s: %s", what, detail, extra={"fields": {"error": detail}})


class SacctFeed:
    """``ledger ingest`` every ``ledger.ingest_every_s`` (runs one at a time)."""

    def __init__(self, engine: Engine, fetch: Fetch, settings: LedgerSettings,
                 metrics: FeedMetrics | None = None,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.engine, self.fetch, self.settings, self.metrics = engine, fetch, settings, metrics
        self.now = now

    def run(self) -> int | None:
        """Ingest up to now; returns the segment records written, None after a warning."""
        cfg, now = self.settings, self.now()
        written, mark = 0, None
        try:
            t = default_since(self.engine, settings=cfg, cluster=cfg.cluster, now=now)
            while t < now:
                step = min(now, t + timedelta(seconds=cfg.window_s))
                res = ingest_window(self.engine, self.fetch, t, step, settings=cfg,
                                    cluster=cfg.cluster, now=now)
                written, mark, t = written + res.segments, res.watermark, step
        except Exception as exc:  # Slurm, database, Prometheus, or a bug: the next run retries
            _warn("ledger ingest from sacct failed (the next run retries from the watermark)",
                  exc)
            self._report(False)
            return None
        log.info("ledger ingest: %d segment record(s), watermark %s", written,
                 mark.isoformat(timespec="seconds") if mark else "unchanged")
        self._report(True)
        return written

    def _report(self, ok: bool) -> None:
        if self.metrics is None:
            return
        mark = None
        try:
            with session_scope(self.engine) as s:
                mark = repo.watermark(s, source_name(self.settings.cluster))
        except SQLAlchemyError:
            pass  # the warning above already says the database is the trouble
        self.metrics.ledger_read("sacct", ok, mark)


def telemetry_source(cluster: str) -> str:
    return f"prometheus-dcgm:{cluster}"


def telemetry_query(selector: str) -> str:
    """One range query for every series the ledger keeps (a plain selector keeps __name__)."""
    names = "|".join([*UTIL, MEMORY, POWER])
    extra = f", {selector.strip().strip(',')}" if selector.strip() else ""
    return f'{{__name__=~"{names}"{extra}}}'


def samples_from_matrix(answer: Any) -> tuple[list[Sample], int]:
    """GPU samples of a ``query_range`` answer over the DCGM series, and how many values were
    skipped (no Hostname/gpu label, not a finite number). InputError for an answer that is not
    a successful matrix: garbage is one error, never an empty success."""
    from railgang.daemon.serving.prometheus import matrix_result

    result = matrix_result(answer, MAX_TELEMETRY_SERIES)
    util: dict[tuple[str, int, int], tuple[int, float]] = {}  # key -> (rank, %)
    extra: dict[tuple[str, int, int], dict[str, float]] = {}
    skipped = 0
    for item in result:
        metric = item.get("metric") if isinstance(item, Mapping) else None
        values = item.get("values") if isinstance(item, Mapping) else None
        if not isinstance(metric, Mapping) or not isinstance(values, list):
            skipped += 1
            continue
        name, host, gpu = metric.get("__name__"), metric.get("Hostname"), metric.get("gpu")
        if not isinstance(host, str) or not host or not isinstance(gpu, str) \
                or not gpu.isdigit() or name not in (*UTIL, MEMORY, POWER):
            skipped += len(values)
            continue
        for pair in values:
            try:
                t, v = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError, KeyError):
                skipped += 1
                continue
            if not (math.isfinite(t) and math.isfinite(v)) or v < 0 or t <= 0:
                skipped += 1
                continue
            key = (host, int(gpu), int(t * 1000))
            if name in UTIL:
                rank = list(UTIL).index(name)
                if key not in util or rank >= util[key][0]:
                    util[key] = (rank, min(100.0, v * UTIL[name]))
            else:
                extra.setdefault(key, {})["mem" if name == MEMORY else "power"] = v
    out = [Sample(h, g, t, u, extra.get((h, g, t), {}).get("mem"),
                  extra.get((h, g, t), {}).get("power"))
           for (h, g, t), (_rank, u) in sorted(util.items())]
    return out, skipped


Query = Callable[[str, str, float, float, float], Any]
"""``(url, query, start, end, step_s) -> decoded answer`` (``serving.prometheus.query_range``)."""


def _query_range(url: str, query: str, start: float, end: float, step_s: float) -> Any:
    from railgang.daemon.serving.prometheus import query_range

    return query_range(url, query, start, end, step_s)


class TelemetryFeed:
    """DCGM series from Prometheus every ``ledger.telemetry_every_s`` (runs one at a time)."""

    def __init__(self, engine: Engine, settings: LedgerSettings,
                 metrics: FeedMetrics | None = None, query: Query = _query_range,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.engine, self.settings, self.metrics = engine, settings, metrics
        self.query, self.now = query, now

    def run(self) -> int | None:
        """Read up to now minus the scrape lag; returns samples stored, None after a warning."""
        cfg = self.settings
        source = telemetry_source(cfg.cluster)
        until = self.now() - timedelta(seconds=SCRAPE_LAG_S)
        stored, mark = 0, None
        try:
            with session_scope(self.engine) as s:
                mark = repo.watermark(s, source)
            oldest = until - timedelta(seconds=cfg.first_lookback_s)
            t = max(mark, oldest) if mark is not None and mark <= until else \
                until - timedelta(seconds=cfg.telemetry_every_s)
            # a window of at most telemetry_every_s (a day's catch-up is many small answers)
            while t < until:
                step = min(until, t + timedelta(seconds=cfg.telemetry_every_s))
                answer = self.query(cfg.telemetry_prometheus_url,
                                    telemetry_query(cfg.telemetry_selector), t.timestamp(),
                                    step.timestamp(), float(cfg.telemetry_step_s))
                samples, skipped = samples_from_matrix(answer)
                if skipped:
                    log.warning("telemetry from %s: %d value(s) skipped (no Hostname/gpu label "
                                "or not a number)", cfg.telemetry_prometheus_url[:80], skipped)
                with session_scope(self.engine) as s:
                    store_samples(s, samples)
                    if samples:
                        attribute(s, since_ms=min(x.at_ms for x in samples),
                                  until_ms=max(x.at_ms for x in samples) + 1)
                    mark = repo.advance_watermark(s, source, step)
                stored, t = stored + len(samples), step
        except Exception as exc:  # Slurm, database, Prometheus, or a bug: the next run retries
            _warn(f"GPU telemetry from {cfg.telemetry_prometheus_url[:80]} failed (the next run "
                  "retries from the watermark)", exc)
            self._report(False, mark)
            return None
        log.info("GPU telemetry: %d sample(s) from %s", stored, cfg.telemetry_prometheus_url[:80])
        self._report(True, mark)
        return stored

    def _report(self, ok: bool, mark: datetime | None) -> None:
        if self.metrics is not None:
            self.metrics.ledger_read("telemetry", ok, mark)


def schedule_feeds(scheduler: object, engine: Engine, settings: Any,
                   metrics: FeedMetrics | None, fetch: Fetch | None) -> list[str]:
    """Add the feeds a configuration asks for to an apscheduler ``BackgroundScheduler``, on one
    executor of their own (a slow sacct never delays a cycle); returns the ids added. ``fetch``
    is None where the backend has no sacct (sim, fake)."""
    from apscheduler.executors.pool import ThreadPoolExecutor

    cfg: LedgerSettings = settings.ledger
    jobs: list[tuple[str, Callable[[], object], int]] = []
    if fetch is not None and cfg.ingest_every_s > 0:
        jobs.append(("ledger-ingest", SacctFeed(engine, fetch, cfg, metrics).run,
                     cfg.ingest_every_s))
    if cfg.telemetry_prometheus_url:
        jobs.append(("ledger-telemetry", TelemetryFeed(engine, cfg, metrics).run,
                     cfg.telemetry_every_s))
    if not jobs:
        return []
    scheduler.add_executor(ThreadPoolExecutor(1), "ledger")  # type: ignore[attr-defined]
    for job_id, fn, every in jobs:
        scheduler.add_job(fn, "interval", seconds=every,  # type: ignore[attr-defined]
                          next_run_time=datetime.now(UTC), id=job_id, executor="ledger",
                          coalesce=True, max_instances=1, misfire_grace_time=max(1, every))
    return [j for j, _, _ in jobs]


__all__ = ["FeedMetrics", "Query", "SacctFeed", "TelemetryFeed", "samples_from_matrix",
           "schedule_feeds", "telemetry_query", "telemetry_source"]
