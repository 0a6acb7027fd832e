"""The ``railgang`` command. Each component contributes its own sub-app; this file only wires them.

Every ``RailgangError`` becomes one line on stderr and its exit code (``errors.ExitCode``, the one
table; docs/cli.md), never a traceback. Settings reach the sub-commands through the typer context
(``cli_common.settings_from(ctx)``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from railgang.daemon import __version__
from railgang.daemon.cli_common import CliState, JsonOpt, settings_from
from railgang.daemon.config import masked_dump
from railgang.daemon.errors import RailgangError

app = typer.Typer(
    name="railgang",
    help="ML-aware scheduling layer for Slurm GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
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
    data = masked_dump(settings_from(ctx))
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    for group, values in data.items():
        if isinstance(values, dict):
            typer.echo(f"[{group}]")
            for key, value in values.items():
                typer.echo(f"{key} = {json.dumps(value)}")
            typer.echo("")
        else:
            typer.echo(f"{group} = {json.dumps(values)}")


def _register_components() -> None:
    # Imported here so that `railgang --help` lists them while each stays in its own package.
    from railgang.daemon.accounting.cli import ledger_app
    from railgang.daemon.api.cli import api
    from railgang.daemon.quota_cli import quota_app, token_app
    from railgang.daemon.report.cli import report
    from railgang.daemon.service.cli import daemon_app, explain
    from railgang.daemon.sim.cli import sim
    from railgang.daemon.top import top
    from railgang.db.cli import app as db_app
    from railgang.slurm_plugins.demo.cli import demo
    from railgang.slurm_plugins.devcluster.cli import app as devcluster_app
    from railgang.topology.cli import app as topology_app
    from railgang.topology.cli import place

    app.add_typer(daemon_app, name="daemon")
    app.command("api")(api)
    app.add_typer(quota_app, name="quota")
    app.add_typer(token_app, name="token")
    app.add_typer(ledger_app, name="ledger")
    app.command("explain")(explain)
    app.add_typer(db_app, name="db")
    app.add_typer(devcluster_app, name="devcluster")
    app.add_typer(topology_app, name="topology")
    app.command("place")(place)
    app.command("sim")(sim)
    app.command("demo")(demo)
    app.command("top")(top)
    app.command("report")(report)


_register_components()


def main() -> None:
    try:
        app()
    except RailgangError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
