"""The ``railgang`` command. Each component contributes its own sub-app; this file only wires them.

Every ``RailgangError`` becomes one line on stderr and its exit code (``errors.ExitCode``, the one
table; docs/cli.md), never a traceback. Settings reach the sub-commands through the typer context
(``cli.common.settings_from(ctx)``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console

from railgang.daemon import __version__
from railgang.daemon.cli.common import CliState, JsonOpt, emit, settings_from, state_from
from railgang.daemon.cli.lazy import Component, LazyGroup
from railgang.errors import RailgangError

app = typer.Typer(
    name="railgang",
    help="ML-aware scheduling layer for Slurm GPU clusters.",
    cls=LazyGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,  # `railgang completion SHELL` prints the script (complete.py)
    context_settings={"help_option_names": ["-h", "--help"]},
)
config_app = typer.Typer(help="Show and check the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")

err_console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"railgang {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML config file (default: $RAILGANG_CONFIG).",
                     envvar="RAILGANG_CONFIG"),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    # settings are read on first use (settings_from), so `--help` needs no config file
    ctx.obj = CliState(config_path=config)


@config_app.command("show")
def config_show(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Print the effective configuration (file + RAILGANG_* variables + defaults), secrets masked."""
    from railgang.daemon.config import masked_dump, render_toml

    data = masked_dump(settings_from(ctx))
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo(render_toml(data), nl=False)  # loads back: `railgang --config FILE config check`


@config_app.command("check")
def config_check(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """Load and validate the configuration (file + RAILGANG_* variables); exit 1 with the problem."""
    state = state_from(ctx)
    settings = state.settings()  # the loader's own checks; a problem is a ConfigError: one line
    # names the loader cannot know: the policies are discovered from the core (imported here only)
    from railgang.daemon.config import DAEMON_BACKENDS, unsupported_backend
    from railgang.daemon.cycle_settings import cycle_from

    if settings.slurm.backend not in DAEMON_BACKENDS:  # `daemon run` would refuse it
        raise unsupported_backend(settings.slurm.backend)
    cycle_from(settings)  # the policy and [daemon.cycle], as `daemon run` and `sim` build them
    source = state.config_path or os.environ.get("RAILGANG_CONFIG")
    emit({"ok": True, "config": str(source) if source else None}, as_json,
         f"ok: {source or 'defaults and RAILGANG_* variables (no config file)'}")


@app.command("completion")
def completion(shell: Annotated[Literal["bash", "zsh", "fish"], typer.Argument(
        help="The shell to print the completion script of.")]) -> None:
    """Print the shell's TAB completion script.

    Install: railgang completion bash > /etc/bash_completion.d/railgang (docs/cli.md)."""
    from railgang.daemon.cli.complete import SCRIPTS

    typer.echo(SCRIPTS[shell], nl=False)


# Every other component, imported only when its command runs (cli/lazy.py): `railgang --help`
# lists them from this table. The help line is the command's own first line (a test checks).
LazyGroup.components = {
    "daemon": Component("railgang.daemon.service.cli", "daemon_app",
                        "The scheduling daemon: run it, or ask how it is doing."),
    "api": Component("railgang.daemon.api.cli", "api", "Serve the admin API (quotas, ledger, "
                     "chargeback, explanations); OpenAPI docs at /docs."),
    "quota": Component("railgang.daemon.cli.quota", "quota_app",
                       "Quotas, priority-class grants, rates and quota events."),
    "token": Component("railgang.daemon.cli.tokens", "token_app",
                       "API tokens (stored hashed; the secret is shown once)."),
    "ledger": Component("railgang.daemon.ledger.cli", "ledger_app", "The usage ledger: sacct "
                        "ingest (exactly once), reconciliation, telemetry intake."),
    "explain": Component("railgang.daemon.service.cli", "explain", "Why a job waits (reason, "
                         "place in the order, what blocks it) or where it runs and why; for a "
                         "node, why it is out of service."),
    "db": Component("railgang.daemon.cli.db", "app",
                    "Database migrations (SQLite by default, PostgreSQL by URL)."),
    "devcluster": Component("railgang.devcluster.cli", "app", "A local GPU Slurm "
                            "test cluster from Debian's packages on this machine (root, loopback "
                            "only): 22.05 on Debian 12, 24.11/26.05 in a container "
                            "(docs/devcluster.md)."),
    "topology": Component("railgang.daemon.cli.topology", "app",
                          "Check and show Slurm topology.conf files."),
    "place": Component("railgang.daemon.cli.topology", "place", "Place a gang on a topology: exit 0 "
                       "placed, 3 cannot be placed now (reason printed)."),
    "sim": Component("railgang.daemon.sim.commands", "sim_app",
                     "Replay a job trace through the decision core on a simulated cluster."),
    "serving": Component("railgang.daemon.serving.cli", "serving_app", "Serving deployments "
                         "beside training: demand, forecast, lending."),
    "demo": Component("railgang.demo.cli", "demo", "Submit a reproducible mix of "
                      "hinted training jobs to the cluster in SLURM_CONF."),
    "top": Component("railgang.daemon.cli.top", "top", "Live view of leaves, nodes (one cell per GPU, "
                     "one letter per job) and jobs."),
    "queue": Component("railgang.daemon.cli.queue", "queue", "Waiting jobs in railgang's order, "
                       "with reason, class, place and expected start."),
    "report": Component("railgang.daemon.report.cli", "report", "Build the daily utilisation "
                        "report: teams, pools, queue, cost of chaos, anomalies."),
    "paths": Component("railgang.daemon.cli.paths", "paths", "Print where the installed "
                       "job_submit.lua and SPANK plugin source are. Exit 1: one is missing."),
}


def main() -> None:
    try:
        app()
    except RailgangError as exc:
        from rich.text import Text

        from railgang.daemon.safe_output import term_safe

        # the message quotes what the user gave (an id, a file's line): never markup, never a
        # control sequence (safe_output); only its own line breaks are kept
        err_console.print(Text.assemble(("error:", "bold red"), " ",
                                        term_safe(exc, newlines=True)),
                          highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
