"""The ``railgang sim`` component: the replay command (``cli.py``) plus ``sim sweep GRID.toml``
(``sweep/``). Built here, above both, so the replay command never imports the sweep, which
checks a grid's options with the replay command's own parser."""

from __future__ import annotations

from railgang.daemon.sim.cli import sim
from railgang.daemon.sim.sweep.cli import with_sweep

sim_app = with_sweep(sim)

__all__ = ["sim_app"]
