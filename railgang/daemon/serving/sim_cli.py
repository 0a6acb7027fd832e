"""``railgang sim --serving FILE``: the part of the sim command that replays serving demand beside
the training trace (``simulate.py``). ``--nodes`` counts the training nodes; the serving pool's
nodes (each deployment's max_replicas TP groups in whole nodes) are added to the shape cluster."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from railgang.daemon.serving.config import ServingSettings
from railgang.daemon.serving.forecast import ForecastConfig
from railgang.daemon.serving.model import ServingSet, read_demand
from railgang.daemon.serving.plan import MODES, Mode
from railgang.daemon.serving.replay import ServingKnobs, pool_nodes
from railgang.errors import ConfigError, InputError


def load(path: Path, strict: bool) -> ServingSet:
    """The demand file, with a warning per skipped row (at most 10, then a count)."""
    notes: list[str] = []
    got = read_demand(path, strict=strict, notes=notes)
    for problem in got.problems[:10]:
        typer.echo(f"warning: skipped {problem.render()}", err=True)
    if len(got.problems) > 10:
        typer.echo(f"warning: skipped {len(got.problems) - 10} more malformed rows", err=True)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    return got


def parse_modes(text: str) -> list[Mode]:
    """``static,forecast`` (the default comparison); ``reactive`` adds the no-forecast baseline."""
    wanted = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in wanted if m not in MODES]
    if bad or not wanted:
        raise ConfigError(f"--serving-modes: unknown {', '.join(bad) or '(none)'}; known: "
                          f"{', '.join(MODES)}")
    return [m for m in MODES if m in wanted]


def knobs_from(history_days: int, buffer_gpus: float | None, quantile: float,
               settings: ServingSettings | None = None, *,
               lend_rigid: bool | None = None) -> ServingKnobs:
    """The replay's knobs: the daemon's ``[serving]`` settings (``settings``, from ``--config``;
    None: the daemon's defaults) with the command's options on top."""
    if history_days < 3:
        raise ConfigError("--serving-history-days must be at least 3 (fit + held-back days)")
    if buffer_gpus is not None and not (math.isfinite(buffer_gpus) and buffer_gpus >= 0):
        raise ConfigError("--serving-buffer-gpus must be a finite number >= 0")
    # fit on a whole week when the history allows, and hold back the days after it (weekdays
    # when the history starts on a Monday): a weekend held back says little about a weekday
    holdout = history_days - 7 if history_days >= 8 else min(2, history_days - 2)
    fc = ForecastConfig(buffer_quantile=quantile, holdout_days=holdout)
    given: dict[str, object] = {} if lend_rigid is None else {"lend_rigid": lend_rigid}
    return ServingKnobs.of(settings or ServingSettings(), history_days=history_days, forecast=fc,
                           buffer_gpus=buffer_gpus, **given)


def run(path: Path, jobs: Sequence[Any], policy: Any, *, nodes: int, gpus_per_node: int,
        leaf: int, modes: str, knobs: ServingKnobs, config: Any, as_json: bool,
        meta: dict[str, Any]) -> None:
    """Read the demand, build training + serving nodes, replay, print the report."""
    from railgang.daemon.serving.replay import cut_trace
    from railgang.daemon.serving.simulate import compare, table
    from railgang.topology.fabric import fabric_from_shape

    sset = load(path, strict=False)
    wanted = parse_modes(modes)
    if nodes < 1 or gpus_per_node < 1 or leaf < 1:
        raise ConfigError("--nodes, --gpus-per-node and --leaf must be positive")
    serving = sum(pool_nodes(sset, gpus_per_node).values())  # refuses a huge pool first
    fabric = fabric_from_shape(nodes + serving, gpus_per_node, leaf)
    window = max(d.end_s for d in sset.demand.values()) - knobs.history_days * 86400.0
    if window <= knobs.step_s:
        raise ConfigError(f"the demand file spans {(window / 86400) + knobs.history_days:.1f} "
                          f"days: nothing is left after {knobs.history_days} day(s) of history")
    inside = cut_trace(jobs, window)
    if not inside:
        raise InputError(f"no training job is submitted inside the serving window "
                         f"({window / 3600:.1f} h after {knobs.history_days} days of history)",
                         path=str(path))
    if len(inside) < len(jobs):
        typer.echo(f"note: {len(jobs) - len(inside)} jobs submitted after the serving window "
                   "are left out", err=True)
    from railgang.daemon.sim.progress import TopologyComm

    sides = compare(inside, policy, fabric, sset, knobs, wanted, config=config,
                    comm=TopologyComm(fabric))
    if as_json:
        meta = {**meta, "serving_file": str(path), "training_nodes": nodes,
                "serving_nodes": serving, "jobs": len(inside)}
        typer.echo(json.dumps({"meta": meta, "results": {s.mode: s.row() for s in sides}},
                              indent=2))
        return
    typer.echo("\n".join(table(sides)))


__all__ = ["knobs_from", "parse_modes", "run"]
