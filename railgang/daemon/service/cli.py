"""``railgang daemon run|status`` and ``railgang explain JOBID``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from railgang.daemon.cli.common import JsonOpt, exit_with, settings_from
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
    from railgang.daemon.service.status import daemon_status, render_status

    st = daemon_status(settings_from(ctx))
    typer.echo(json.dumps(st, indent=2) if as_json else "\n".join(render_status(st)))
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
