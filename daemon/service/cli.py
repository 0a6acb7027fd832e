"""``railgang daemon run|status`` and ``railgang explain JOBID``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from railgang.daemon.service.logs import LogFormat, setup_logging

daemon_app = typer.Typer(help="The scheduling daemon: run it, or ask how it is doing.",
                         no_args_is_help=True)

EXIT_NOT_RUNNING = 4  # also: `daemon run --no-wait` while another daemon leads


@daemon_app.command("run")
def run(
    once: Annotated[bool, typer.Option("--once", help="Run one cycle and exit.")] = False,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="Exit 4 instead of standing by when another daemon leads.")] = False,
    log_format: Annotated[str, typer.Option(
        "--log-format", help="json (one object per line) or text.")] = "text",
) -> None:
    """Lead the cluster's scheduling: a cycle every daemon.cycle_interval_s seconds."""
    from railgang.daemon.cli import settings
    from railgang.daemon.errors import ConfigError
    from railgang.daemon.service.runner import run_daemon

    if log_format not in ("json", "text"):
        raise ConfigError(f"--log-format must be json or text, not {log_format!r}")
    fmt: LogFormat = "json" if log_format == "json" else "text"
    setup_logging(fmt)
    raise typer.Exit(run_daemon(settings(), once=once, wait=not no_wait))


@daemon_app.command("status")
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Leader, last cycle and its age, heartbeat age, journal counts. Exit 4: no daemon runs."""
    from railgang.daemon.cli import settings
    from railgang.daemon.service.status import daemon_status

    st = daemon_status(settings())
    if as_json:
        typer.echo(json.dumps(st, indent=2))
    else:
        leader, last, beat = st["leader"], st["last_cycle"], st["heartbeat"]
        typer.echo("daemon: " + ("running" if st["running"] else "not running"))
        if leader:
            typer.echo(f"leader: pid {leader['pid']} on {leader['host']} since "
                       f"{leader['since']} ({leader['backend']} backend, {leader['policy']} policy)"
                       + ("" if st["running"] else " — last known"))
        if last:
            typer.echo(f"last cycle: #{last['id']} at {last['finished_at']} ({last['age_s']:.0f} s "
                       f"ago, {last['duration_ms'] or 0:.0f} ms): {last['pending']} pending, "
                       f"{last['running']} running, {last['actions']} actions, {last['failed']} "
                       "failed" + (f"; error: {last['error']}" if last["error"] else ""))
        age = beat["age_s"]
        typer.echo(f"heartbeat: {beat['file']}: "
                   + ("missing" if age is None else f"{age:.0f} s old"))
        if st["journal"]:
            typer.echo("journal: " + ", ".join(f"{k} {v}" for k, v in st["journal"].items()))
    if not st["running"]:
        raise typer.Exit(EXIT_NOT_RUNNING)


def explain(
    job_id: Annotated[str, typer.Argument(help="Slurm job id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Why a job waits (reason, place in the order, what blocks it) or where it runs and why."""
    from railgang.daemon.cli import settings
    from railgang.daemon.service.status import explanation, render

    e = explanation(settings(), job_id)
    typer.echo(json.dumps(e, indent=2) if as_json else render(e))


__all__ = ["EXIT_NOT_RUNNING", "daemon_app", "explain"]
