"""What ``railgang sim --ledger`` shows: the estimate before anything is written, the question
above ``CONFIRM_SAMPLES`` (``--yes`` skips it; without a terminal it refuses in one line) and a
progress bar over the samples while they are stored."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from railgang.daemon.core.model.plan import Policy
from railgang.daemon.sim.engine import EngineConfig
from railgang.daemon.sim.ledger_run import CONFIRM_SAMPLES, LedgerRun, human_bytes, prepare_ledger
from railgang.daemon.sim.telemetry import LedgerStats
from railgang.daemon.sim.traces.model import TraceJob
from railgang.errors import InputError


def confirm(run: LedgerRun, *, yes: bool, interactive: bool) -> bool:
    """Whether to write: always under the threshold or with ``--yes``; else ask a person, and
    refuse (an :class:`InputError`) when nobody can answer."""
    if yes or not run.needs_confirmation:
        return True
    if not interactive:
        raise InputError(
            f"would write {run.samples:,} GPU samples (about "
            f"{human_bytes(run.estimated_bytes)}), more than {CONFIRM_SAMPLES:,}: pass --yes, "
            "or raise --telemetry-interval-s, or replay fewer jobs (--limit)", field="--ledger")
    import typer

    return bool(typer.confirm("Write it?", default=False, err=True))


def write_sim_ledger(err: Console, url: str, jobs: Sequence[TraceJob], policy: Policy,
                     fabric: Any, config: EngineConfig, *, start: str | None,
                     interval_s: float, seed: int, yes: bool, quiet: bool,
                     interactive: bool | None = None) -> LedgerStats | None:
    """Replay, print the estimate, ask if it is large, write with a progress bar. None: the
    person said no (nothing written)."""
    run = prepare_ledger(url, jobs, policy, fabric, config, start=start, interval_s=interval_s,
                         seed=seed)
    try:
        err.print(run.describe(), highlight=False, soft_wrap=True)
        ok = confirm(run, yes=yes, interactive=sys.stdin.isatty() if interactive is None
                     else interactive)
        if not ok:
            err.print("ledger: nothing written", highlight=False)
            return None
        started = time.perf_counter()
        with Progress(TextColumn("{task.description:>10}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=err, transient=True,
                      disable=quiet) as bar:
            task = bar.add_task("samples", total=run.samples)
            stats = run.write(lambda done, total: bar.update(task, completed=done, total=total))
        err.print(f"[dim]ledger: written in {time.perf_counter() - started:,.1f} s[/]",
                  highlight=False)
        return stats
    finally:
        run.close()


__all__ = ["confirm", "write_sim_ledger"]
