"""``railgang sim`` (filled in by the simulator work)."""

from __future__ import annotations

import typer


def sim() -> None:
    """Replay a job trace through the decision core (not yet implemented)."""
    raise typer.Exit(2)
