"""``railgang daemon run|status`` and ``railgang explain JOBID``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from railgang.daemon.cli_common import JsonOpt, exit_with, settings_from
from railgang.daemon.service.logs import LogFormat, setup_logging
from railgang.errors import ExitCode

daemon_app = typer.Typer(help="The scheduling daemon: run it, or ask how it is doing.",
                         no_args_is_help=True)

# kept for importers; the table is railgang.errors.ExitCode
EXIT_NOT_RUNNING = ExitCode.NOT_RUNNING  # also: `daemon run --no-wait` while another daemon leads


@daemon_app.command("run")
def run(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Run one cycle and exit.")] = False,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="Exit 4 instead of standing by when another daemon leads.")] = False,
    log_format: Annotated[LogFormat, typer.Option(
        "--log-format", help="json (one object per line) or text.")] = "text",
) -> None:
    """Lead the cluster's scheduling: a cycle every daemon.cycle_interval_s seconds."""
    from railgang.daemon.service.runner import run_daemon

    settings = settings_from(ctx)  # a config error before the log setup: one plain line
    setup_logging(log_format)
    exit_with(run_daemon(settings, once=once, wait=not no_wait))


@daemon_app.command("status")
def status(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Leader, last cycle and its age, heartbeat age, journal counts. Exit 4: no daemon runs."""
    from railgang.daemon.service.status import daemon_status, render_refused

    st = daemon_status(settings_from(ctx))
    if as_json:
        typer.echo(json.dumps(st, indent=2))
    else:
        from railgang.daemon.safe_output import term_safe_data

        # a cycle's error quotes Slurm and users' text: shown as escapes, never obeyed
        shown = term_safe_data(st)
        leader, last, beat = shown["leader"], shown["last_cycle"], shown["heartbeat"]
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
        if shown["journal"]:
            typer.echo("journal: " + ", ".join(f"{k} {v}" for k, v in shown["journal"].items()))
        for line in render_refused(shown.get("refused_starts") or {}):
            typer.echo(line)
    if not st["running"]:
        exit_with(ExitCode.NOT_RUNNING)


def explain(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(
        help="Slurm job id, or a node name: why the node is out (e.g. held out as flaky).")],
    as_json: JsonOpt = False,
) -> None:
    """Why a job waits (reason, place in the order, what blocks it) or where it runs and why;
    for a node, why it is out of service."""
    from railgang.daemon.service.status import explanation, render

    e = explanation(settings_from(ctx), job_id)
    typer.echo(json.dumps(e, indent=2) if as_json else render(e))


__all__ = ["EXIT_NOT_RUNNING", "daemon_app", "explain"]
