"""``railgang topology check|show`` and ``railgang place`` (filled in by the topology work)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Check and show Slurm topology.conf files.", no_args_is_help=True)


@app.command("check")
def check() -> None:
    """Validate a topology.conf (not yet implemented)."""
    raise typer.Exit(2)


def place() -> None:
    """Place a gang on a topology (not yet implemented)."""
    raise typer.Exit(2)
