"""``railgang devcluster up|down|status``."""

from __future__ import annotations

import typer

app = typer.Typer(help="A local GPU Slurm 22.05 test cluster on this machine.", no_args_is_help=True)
