"""``railgang sim --ledger``: replay, say how much it will write, then write it with progress.

The replay itself is fast (0.2 s for 500 Philly jobs); what costs is the per-GPU telemetry:
every GPU of the cluster at every ``--telemetry-interval-s`` over the whole replay. 500 Philly
jobs on 512 GPUs span 113 days: 83 M samples at 60 s, 4.2 GB of SQLite, 9 minutes. So the run
is split in two: :func:`prepare_ledger` checks the database and replays, and its
:class:`LedgerRun` carries the estimate (rows, bytes) the CLI prints and, above
``CONFIRM_SAMPLES``, asks about before :meth:`LedgerRun.write` stores anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, select

from railgang.daemon.core.model.plan import Policy
from railgang.daemon.sim.engine import EngineConfig, RunResult
from railgang.daemon.sim.telemetry import (
    LedgerStats,
    SimSegment,
    TelemetryConfig,
    replay_span,
    sample_count,
    simulate_with_ledger,
    write_ledger,
)
from railgang.daemon.sim.traces.model import TraceJob

# SQLite bytes per stored GPU sample, measured (BENCHMARKS.md "sim --ledger"): the row with its
# primary key (node, gpu, at) plus the at_epoch_ms index of migration 0007
BYTES_PER_SAMPLE = 66
# more samples than this ask first (--yes skips the question; without a terminal it refuses)
CONFIRM_SAMPLES = 5_000_000


@dataclass
class LedgerRun:
    """A replay ready to be stored: what it will write, and the write itself."""

    engine: Engine
    jobs: Sequence[TraceJob]
    result: RunResult
    segments: list[SimSegment]
    tiers: dict[str, str]
    fabric: Any
    config: TelemetryConfig
    span_s: float  # trace time the samples cover
    gpus: int
    samples: int

    @property
    def estimated_bytes(self) -> int:
        return self.samples * BYTES_PER_SAMPLE

    @property
    def needs_confirmation(self) -> bool:
        return self.samples > CONFIRM_SAMPLES

    def describe(self) -> str:
        """One line: what will be written and about how big it gets."""
        return (f"ledger: {len(self.jobs):,} jobs over {self.span_s / 86400:,.1f} days -> "
                f"{self.samples:,} GPU samples ({self.gpus:,} GPUs every "
                f"{self.config.interval_s:g} s), about {human_bytes(self.estimated_bytes)} "
                "in SQLite")

    def write(self, on_progress: Callable[[int, int], None] | None = None) -> LedgerStats:
        return write_ledger(self.engine, self.jobs, self.result, self.segments, self.fabric,
                            self.config, node_tier=self.tiers, on_progress=on_progress)

    def close(self) -> None:
        self.engine.dispose()


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000:
            return f"{n:,.0f} {unit}"
        n /= 1000
    return f"{n:,.1f} TB"


def prepare_ledger(url: str, jobs: Sequence[TraceJob], policy: Policy, fabric: Any,
                   config: EngineConfig, *, start: str | None = None, interval_s: float = 60.0,
                   seed: int = 0) -> LedgerRun:
    """Check the database (migrated to head; a job id already in the ledger under the ``sim``
    cluster is refused: one replay per database) and replay; nothing is written yet.

    ``start`` (YYYY-MM-DD, UTC) is the day trace time 0 falls on (default: the Monday
    ``TelemetryConfig.start_epoch``)."""
    from railgang.daemon.sim.progress import TopologyComm
    from railgang.db import migrate
    from railgang.db.models import Job
    from railgang.db.session import make_engine, session_scope
    from railgang.errors import ConfigError, InputError

    if interval_s < 1:
        raise ConfigError("--telemetry-interval-s must be at least 1 second")
    cfg = TelemetryConfig(interval_s=interval_s, seed=seed)
    if start is not None:
        try:
            day = datetime.strptime(start, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError as exc:
            raise InputError(f"{start!r} is not a date; use YYYY-MM-DD", field="--ledger-start"
                             ) from exc
        cfg = TelemetryConfig(start_epoch=int(day.timestamp()), interval_s=interval_s, seed=seed)
    migrate.upgrade(url)
    engine = make_engine(url)
    try:
        with session_scope(engine) as s:
            clash = s.scalar(select(Job.slurm_job_id).where(
                Job.cluster == cfg.cluster, Job.slurm_job_id.in_([j.job_id for j in jobs[:500]]))
                .limit(1))
        if clash is not None:
            raise ConfigError(f"--ledger: job {clash} of this trace is already in the ledger "
                              "(cluster 'sim'); use a fresh database")
        result, segments, tiers = simulate_with_ledger(jobs, policy, fabric, config=config,
                                                       comm=TopologyComm(fabric))
    except BaseException:
        engine.dispose()
        raise
    t0, end_t = replay_span(jobs, result, segments)
    return LedgerRun(engine, jobs, result, segments, tiers, fabric, cfg, end_t - t0,
                     sum(fabric.facts(n).gpus for n in fabric.nodes),
                     sample_count(fabric, t0, end_t, interval_s))


def replay_into_ledger(url: str, jobs: Sequence[TraceJob], policy: Policy, fabric: Any,
                       config: EngineConfig, *, start: str | None = None,
                       interval_s: float = 60.0, seed: int = 0) -> LedgerStats:
    """``railgang sim --ledger URL`` without the estimate and the confirmation: replay once
    more with segment logging and store it."""
    run = prepare_ledger(url, jobs, policy, fabric, config, start=start, interval_s=interval_s,
                         seed=seed)
    try:
        return run.write()
    finally:
        run.close()


__all__ = ["BYTES_PER_SAMPLE", "CONFIRM_SAMPLES", "LedgerRun", "human_bytes", "prepare_ledger",
           "replay_into_ledger"]
