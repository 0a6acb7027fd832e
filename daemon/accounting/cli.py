"""``railgang ledger ingest|reconcile|telemetry|watermark``."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from sqlalchemy import Engine

from railgang.daemon.accounting.ingest import Fetch
from railgang.daemon.errors import InputError

ledger_app = typer.Typer(help="The usage ledger: sacct ingest (exactly once), reconciliation, "
                              "telemetry intake.", no_args_is_help=True)

When = Annotated[datetime | None, typer.Option(formats=["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"],
                                               help="UTC time, e.g. 2026-11-30T12:00:00")]
FileOpt = Annotated[Path | None, typer.Option(
    "--file", help="Read this `sacct --json` output instead of running sacct.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _utc(t: datetime | None) -> datetime | None:
    return None if t is None else (t if t.tzinfo else t.replace(tzinfo=UTC))


def _fetch(file: Path | None) -> Fetch:
    from railgang.daemon.accounting.ingest import sacct_fetcher
    from railgang.daemon.cli import settings
    from railgang.daemon.slurm.cli.runner import SlurmRunner

    if file is None:
        return sacct_fetcher(SlurmRunner.from_settings(settings().slurm))
    try:
        text = file.read_text()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(file)) from exc
    return lambda _since, _until: text


def _engine() -> Engine:
    from railgang.daemon.api.cli import require_head
    from railgang.daemon.cli import settings
    from railgang.db.session import make_engine

    url = settings().db.url
    require_head(url)
    return make_engine(url)


@ledger_app.command("ingest")
def ingest(since: When = None, until: When = None, file: FileOpt = None,
           as_json: JsonOpt = False) -> None:
    """Ingest [since, until) from sacct in windows of ledger.window_s, one transaction each.
    Default since: the watermark minus ledger.overlap_s; default until: now. Re-running any
    window changes nothing."""
    from railgang.daemon.accounting.ingest import default_since, ingest_window
    from railgang.daemon.cli import settings

    cfg = settings().ledger
    engine = _engine()
    try:
        hi = _utc(until) or datetime.now(UTC)
        lo = _utc(since) or default_since(engine, settings=cfg, cluster=cfg.cluster, now=hi)
        fetch = _fetch(file)
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
def reconcile(since: When = None, until: When = None, file: FileOpt = None,
              as_json: JsonOpt = False) -> None:
    """Every difference between sacct and the ledger in [since, until); exits 3 if any."""
    from railgang.daemon.accounting.ingest import reconcile as run
    from railgang.daemon.cli import settings

    cfg = settings().ledger
    now = datetime.now(UTC)
    hi = _utc(until) or now
    lo = _utc(since) or hi - timedelta(days=1)
    engine = _engine()
    try:
        rep = run(engine, _fetch(file), lo, hi, settings=cfg, now=now)
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
        raise typer.Exit(3)


@ledger_app.command("telemetry")
def telemetry(path: Path,
              fmt: Annotated[str, typer.Option("--format", help="nvidia-smi or dcgm")],
              node: Annotated[str | None, typer.Option(help="Node the samples come from "
                                                       "(nvidia-smi has no host column).")]
              = None,
              scraped_at: When = None) -> None:
    """Store GPU samples and recompute the compute/productive fractions they cover."""
    from railgang.daemon.accounting import telemetry as tm
    from railgang.db.session import session_scope

    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    if fmt == "nvidia-smi":
        if node is None:
            raise InputError("--node is required for nvidia-smi CSV", field="node")
        samples = tm.parse_nvidia_smi_csv(text, node=node, source=str(path))
    elif fmt == "dcgm":
        samples = tm.parse_dcgm(text, scraped_at=_utc(scraped_at) or datetime.now(UTC),
                                source=str(path), node=node)
    else:
        raise InputError("unknown format; use nvidia-smi or dcgm", field="format")
    if not samples:
        typer.echo("no samples")
        return
    engine = _engine()
    try:
        with session_scope(engine) as s:
            tm.store_samples(s, samples)
            n = tm.attribute(s, since_ms=min(x.at_ms for x in samples),
                             until_ms=max(x.at_ms for x in samples) + 1)
    finally:
        engine.dispose()
    typer.echo(f"{len(samples)} sample(s); {n} segment(s) updated")


@ledger_app.command("watermark")
def watermark() -> None:
    """How far sacct has been ingested."""
    from railgang.daemon.accounting.ingest import source_name
    from railgang.daemon.cli import settings
    from railgang.db.repositories import ledger
    from railgang.db.session import session_scope

    engine = _engine()
    try:
        with session_scope(engine) as s:
            mark = ledger.watermark(s, source_name(settings().ledger.cluster))
    finally:
        engine.dispose()
    typer.echo(mark.isoformat() if mark else "(nothing ingested yet)")


__all__ = ["ledger_app"]
