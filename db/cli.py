"""``railgang db upgrade|current``."""

from __future__ import annotations

import typer

app = typer.Typer(help="Database migrations.", no_args_is_help=True)
