"""``railgang sim sweep GRID.toml``: every point of a grid replayed, as a Slurm job array (the
default) or in local processes (``--local N``), gathered into one table and plots.

``railgang sim`` stays one command (``railgang sim --trace ...``); ``with_sweep`` makes it a group
that passes anything but a sub-command name to that command unchanged.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from railgang.daemon.cli.common import JSON_HELP
from railgang.daemon.safe_output import term_text
from railgang.errors import ConfigError, ExitCode, InputError


class SimGroup(TyperGroup):
    """``sim`` with sub-commands: ``sim sweep ...`` runs the sub-command, anything else (``sim
    --trace X``, ``sim --help``) is the plain replay command, parsed and run as before."""

    plain: Any = None  # the plain `sim` click command, set by with_sweep

    @property
    def params(self) -> list[Any]:
        """The plain command's options: what help, completion and the CLI's own walks see."""
        return list(self.plain.params)

    @params.setter
    def params(self, value: list[Any]) -> None:
        """The group has no options of its own (typer assigns an empty list)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # reached only with a sub-command first (make_context): no group options to parse
        ctx._protected_args, ctx.args = args[:1], args[1:]
        return list(ctx.args)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None,
                     **extra: Any) -> Any:
        if args and args[0] in self.commands:
            return super().make_context(info_name, args, parent, **extra)
        return self.plain.make_context(info_name, args, parent, **extra)


def with_sweep(sim: Callable[..., None]) -> typer.Typer:
    """The ``sim`` component: the replay command ``sim`` plus ``sim sweep``."""
    # click's plain help (rich_markup_mode=None): sim has some sixty options, and rich's table
    # cut their names at 80 columns ("--fair-share-half-l…"); the plain list never cuts a name
    one = typer.Typer(add_completion=False, rich_markup_mode=None)
    one.command("sim", epilog="Grids of replays: railgang sim sweep GRID.toml "
                              "(docs/simulator.md, \"Sweeps\").")(sim)
    plain = typer.main.get_command(one)
    group = type("SimGroup", (SimGroup,), {"plain": plain})
    app = typer.Typer(cls=group, help=sim.__doc__, add_completion=False)
    app.command("sweep")(sweep)
    return app


def sweep(
    grid_file: Annotated[Path, typer.Argument(metavar="GRID.toml",
                                              help="The grid file (TOML: tables sweep, fixed, grid).")],
    local: Annotated[int | None, typer.Option(
        "--local", min=1, max=256, help="Run N points at a time here instead of on Slurm.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Results directory (default: GRID.sweep next to the grid file); on a "
                      "file system the Slurm nodes share.")] = None,
    parallel: Annotated[int, typer.Option(
        "--parallel", min=1, max=10_000, help="Slurm: array tasks running at once (%N).")] = 8,
    sbatch_arg: Annotated[list[str] | None, typer.Option(
        "--sbatch-arg", help="Slurm: one more sbatch option, e.g. --sbatch-arg=--account=team-a "
                             "(repeatable).")] = None,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="Slurm: submit and return; rerun the command to gather.")] = False,
    gather_only: Annotated[bool, typer.Option(
        "--gather", help="Run nothing: gather the results there are into the table and plots.",
    )] = False,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Table only.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Replay every point of a grid (policies, sim options, traces, seeds, cluster shapes) as a
    Slurm job array or in local processes; gather one table (CSV, JSON) and plots."""
    from railgang.daemon.sim.sweep.gather import rows, write_tables
    from railgang.daemon.sim.sweep.grid import load_grid
    from railgang.daemon.sim.sweep.plan import make_plan, save_plan
    from railgang.daemon.sim.sweep.store import Store

    err = Console(stderr=True)
    if local is not None and (no_wait or sbatch_arg):
        raise ConfigError("--no-wait and --sbatch-arg are for Slurm; leave them out with --local")
    grid = load_grid(grid_file)
    store = Store((out or grid_file.with_suffix(".sweep")).absolute())
    plan = make_plan(grid)
    try:
        store.root.mkdir(parents=True, exist_ok=True)
        plan_path = save_plan(plan, store)
    except OSError as exc:  # not a directory, read-only, full
        raise InputError(f"cannot write the sweep's results: {exc.strerror or exc}",
                         path=str(store.root)) from exc
    todo = [p.index for p in plan.points if store.result(p.key) is None]
    err.print(f"sweep {plan.name}: {len(plan.points)} points, {len(plan.points) - len(todo)} "
              f"with a result, {len(todo)} to run" + (" (not now: --gather)" if gather_only else ""),
              highlight=False)
    computed = _run(plan, plan_path, store, todo, err, local=local, parallel=parallel,
                    sbatch_args=sbatch_arg or [], wait=not no_wait) if todo and not gather_only \
        else Counter[str]()
    if no_wait and todo and not gather_only:
        return
    table = rows(plan, store)
    csv_path, json_path = write_tables(plan, store, table)
    plots: list[Path] = []
    if not no_plots:
        from railgang.daemon.sim.sweep.plots import write_plots

        plots = write_plots(table, plan.axes, plan.goals, store.root / "plots")
    _report(plan, table, computed, csv_path, json_path, plots, as_json=as_json)


def _run(plan: Any, plan_path: Path, store: Any, todo: list[int], err: Console, *,
         local: int | None, parallel: int, sbatch_args: list[str], wait: bool) -> Counter[str]:
    """Run the points ``todo`` here or on Slurm; how many ended how."""
    if local is not None:
        from railgang.daemon.sim.sweep.run_local import Outcome, run_local

        def done(o: Outcome) -> None:
            labels = ", ".join(plan.points[o.index].labels.values())
            err.print(f"[dim]point {o.index} ({labels}): {o.status} in {o.wall_s:.1f} s, "
                      f"{o.cpu_s:.1f} CPU s{': ' + o.error if o.error else ''}[/]",
                      highlight=False, soft_wrap=True)

        return Counter(o.status for o in run_local(plan, store, local, todo, done))
    from railgang.daemon.sim.sweep.run_slurm import running, submit
    from railgang.daemon.sim.sweep.run_slurm import wait as wait_for

    earlier = running(store)
    if earlier:  # a rerun while an earlier array still runs: its points are not submitted twice
        err.print(f"job array {', '.join(earlier)} of an earlier run is still running"
                  + ("; waiting for it" if wait else "; run this again once it ends"),
                  highlight=False)
        if not wait:
            return Counter[str]()
        wait_for(earlier)
        todo = [i for i in todo if store.result(plan.points[i].key) is None]
        if not todo:
            return Counter[str]()
    ids = submit(store, plan_path, [plan.points[i].key for i in todo], parallel=parallel,
                 name=plan.name, timeout_s=plan.timeout_s, sbatch_args=sbatch_args)
    err.print(f"submitted job array {', '.join(ids)} ({len(todo)} tasks, {parallel} at a time); "
              f"logs in {store.root / 'logs'}", highlight=False)
    if wait:
        wait_for(ids)
    after = Counter("done" if store.result(plan.points[i].key) else "failed" for i in todo)
    return after if wait else Counter[str]()


def _report(plan: Any, table: list[dict[str, Any]], computed: Counter[str], csv_path: Path,
            json_path: Path, plots: list[Path], *, as_json: bool) -> None:
    status = Counter(r["status"] for r in table)
    summary = {"sweep": plan.name, "points": len(table), "done": status["done"],
               "failed": status["failed"], "missing": status["missing"], "stale": status["stale"],
               "computed_now": computed["done"], "failed_now": computed["failed"],
               "table_csv": str(csv_path), "table_json": str(json_path),
               "plots": len(plots), "git": plan.git}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        out = Console(width=160)
        view = Table(title=f"sweep {plan.name}: {status['done']}/{len(table)} points")
        cols = ["point", *plan.axes, "status", *plan.goals[:4], "cpu_s"]
        for col in cols:
            view.add_column(col, justify="left" if col in plan.axes else "right")
        for row in table:
            view.add_row(*(term_text(_cell(row.get(c))) for c in cols))  # the sweep file's text
        out.print(view)
        out.print(f"table: {csv_path} and {json_path}; {len(plots)} plot files in "
                  f"{csv_path.parent / 'plots'}", highlight=False, soft_wrap=True)
    if status["failed"] or status["missing"] or status["stale"]:
        bad = next(r for r in table if r["status"] != "done")
        Console(stderr=True).print(
            f"[yellow]{status['failed']} point(s) failed, {status['missing']} missing, "
            f"{status['stale']} stale[/] (point "
            f"{bad['point']}: {bad.get('error') or bad['status']}); the same command reruns "
            "only them", highlight=False, soft_wrap=True)
        raise typer.Exit(ExitCode.ERROR)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    return "" if value is None else str(value)


__all__ = ["SimGroup", "sweep", "with_sweep"]
