"""``railgang ledger ingest|reconcile|telemetry|watermark``."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from railgang.daemon.cli.common import JsonOpt, emit, exit_with, settings_from, when_option
from railgang.daemon.when import HELP as WHEN_HELP
from railgang.errors import ExitCode, InputError

if TYPE_CHECKING:  # `ledger --help` imports no SQLAlchemy (tests/daemon/test_cli_imports.py)
    from sqlalchemy import Engine

    from railgang.daemon.config import Settings
    from railgang.daemon.ledger.ingest import Fetch
from railgang.daemon.inputs import (
    SACCT_MAX_BYTES,
    TELEMETRY_MAX_BYTES,
    read_input,
    read_json_text,
)

ledger_app = typer.Typer(help="The usage ledger: sacct ingest (exactly once), reconciliation, "
                              "telemetry intake.", no_args_is_help=True)

When = Annotated[datetime | None, typer.Option(parser=when_option, metavar="TIME", help=WHEN_HELP)]
FileOpt = Annotated[Path | None, typer.Option(
    "--file", help="Read this `sacct --json` output instead of running sacct.")]
TelemetryFormat = Literal["nvidia-smi", "dcgm"]


def _utc(t: datetime | None) -> datetime | None:
    return None if t is None else (t if t.tzinfo else t.replace(tzinfo=UTC))


def _fetch(settings: Settings, file: Path | None) -> Fetch:
    from railgang.daemon.ledger.ingest import sacct_fetcher
    from railgang.daemon.slurm.cli.runner import SlurmRunner

    if file is None:
        return sacct_fetcher(SlurmRunner.from_settings(settings.slurm))
    text = read_json_text(file, "sacct JSON file", limit=SACCT_MAX_BYTES)  # bounded, regular files
    return lambda _since, _until: text


def _engine(settings: Settings) -> Engine:
    from railgang.db.migrate import engine_at_head

    return engine_at_head(settings.db.url)


@ledger_app.command("ingest")
def ingest(ctx: typer.Context, since: When = None, until: When = None, file: FileOpt = None,
           as_json: JsonOpt = False) -> None:
    """Ingest [since, until) from sacct in windows of ledger.window_s, one transaction each.
    Default since: the watermark minus ledger.overlap_s; default until: now (an --until in the
    future is refused). Re-running any window changes nothing."""
    from railgang.daemon.ledger.ingest import default_since, ingest_window, not_in_future

    settings = settings_from(ctx)
    cfg = settings.ledger
    now = datetime.now(UTC)
    hi = _utc(until) or now
    not_in_future(hi, now)  # before any window: a future end moved the watermark past open jobs
    fetch = _fetch(settings, file)  # a bad --file is refused before the database is touched
    engine = _engine(settings)
    try:
        lo = _utc(since) or default_since(engine, settings=cfg, cluster=cfg.cluster, now=hi)
        results = []
        t = lo
        while t < hi:
            step = min(hi, t + timedelta(seconds=cfg.window_s))
            results.append(ingest_window(engine, fetch, t, step, settings=cfg,
                                         cluster=cfg.cluster))
            t = step
    finally:
        engine.dispose()
    total = sum(r.segments for r in results)
    data = {"since": lo.isoformat(), "until": hi.isoformat(), "windows": len(results),
            "segments": total,
            "watermark": results[-1].watermark.isoformat() if results else None}
    typer.echo(json.dumps(data, indent=2) if as_json else
               f"ingested {total} segment record(s) in {len(results)} window(s) "
               f"{lo:%Y-%m-%dT%H:%M:%S}..{hi:%Y-%m-%dT%H:%M:%S}; watermark {data['watermark']}")


@ledger_app.command("reconcile")
def reconcile(ctx: typer.Context, since: When = None, until: When = None, file: FileOpt = None,
              as_json: JsonOpt = False) -> None:
    """Every difference between sacct and the ledger in [since, until); exits 3 if any."""
    from railgang.daemon.ledger.ingest import reconcile as run

    settings = settings_from(ctx)
    cfg = settings.ledger
    now = datetime.now(UTC)
    hi = _utc(until) or now
    lo = _utc(since) or hi - timedelta(days=1)
    fetch = _fetch(settings, file)
    engine = _engine(settings)
    try:
        rep = run(engine, fetch, lo, hi, settings=cfg, now=now)
    finally:
        engine.dispose()
    if as_json:
        typer.echo(json.dumps({"since": rep.since, "until": rep.until,
                               "sacct_gpu_seconds": rep.sacct_gpu_seconds,
                               "ledger_gpu_seconds": rep.ledger_gpu_seconds, "clean": rep.clean,
                               "differences": [asdict(d) for d in rep.differences]}, indent=2))
    else:
        for d in rep.differences:
            typer.echo(f"{d.kind:8} {d.cluster}/{d.job} start={d.start}: {d.detail}")
        typer.echo(f"sacct {rep.sacct_gpu_seconds} GPU-s, ledger {rep.ledger_gpu_seconds} GPU-s,"
                   f" {len(rep.differences)} difference(s)")
    if not rep.clean:
        exit_with(ExitCode.NOT_NOW)


@ledger_app.command("telemetry")
def telemetry(ctx: typer.Context, path: Path,
              fmt: Annotated[TelemetryFormat, typer.Option(
                  "--format", help="nvidia-smi CSV or a DCGM exporter scrape.")],
              node: Annotated[str | None, typer.Option(help="Node the samples come from "
                                                       "(nvidia-smi has no host column).")]
              = None,
              scraped_at: When = None, as_json: JsonOpt = False) -> None:
    """Store GPU samples and recompute the compute/productive fractions they cover."""
    from railgang.daemon.ledger import telemetry as tm
    from railgang.db.session import session_scope

    text = read_input(path, "telemetry file", limit=TELEMETRY_MAX_BYTES)
    if fmt == "nvidia-smi":
        if node is None:
            raise InputError("--node is required for nvidia-smi CSV", field="node")
        samples = tm.parse_nvidia_smi_csv(text, node=node, source=str(path))
    else:
        samples = tm.parse_dcgm(text, scraped_at=_utc(scraped_at) or datetime.now(UTC),
                                source=str(path), node=node)
    if not samples:
        emit({"samples": 0, "segments_updated": 0}, as_json, "no samples")
        return
    engine = _engine(settings_from(ctx))
    try:
        with session_scope(engine) as s:
            tm.store_samples(s, samples)
            n = tm.attribute(s, since_ms=min(x.at_ms for x in samples),
                             until_ms=max(x.at_ms for x in samples) + 1)
    finally:
        engine.dispose()
    emit({"samples": len(samples), "segments_updated": n}, as_json,
         f"{len(samples)} sample(s); {n} segment(s) updated")


@ledger_app.command("watermark")
def watermark(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """How far sacct has been ingested."""
    from railgang.daemon.ledger.ingest import source_name
    from railgang.db.repositories import ledger
    from railgang.db.session import session_scope

    settings = settings_from(ctx)
    engine = _engine(settings)
    try:
        with session_scope(engine) as s:
            mark = ledger.watermark(s, source_name(settings.ledger.cluster))
    finally:
        engine.dispose()
    emit({"cluster": settings.ledger.cluster, "watermark": mark.isoformat() if mark else None},
         as_json, mark.isoformat() if mark else "(nothing ingested yet)")


__all__ = ["ledger_app"]
