"""``railgang demo``: submit the demo workload (about 30 hinted jobs) to a Slurm cluster."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from railgang.daemon.cli.common import JsonOpt, emit, settings_from
from railgang.demo.workload import make_workload, submit
from railgang.errors import InputError

if TYPE_CHECKING:  # pydantic-settings is imported when settings are read, not by --help
    from railgang.daemon.config import Settings

console = Console()


def _slurm_conf(settings: Settings) -> Path:
    """SLURM_CONF if exported, else the local cluster's (``railgang devcluster up`` prints it)."""
    from railgang.devcluster.cli import spec_from_settings

    if os.environ.get("SLURM_CONF"):
        return Path(os.environ["SLURM_CONF"])
    conf = spec_from_settings(settings).slurm_conf
    if not conf.is_file():
        raise InputError("no Slurm cluster: export SLURM_CONF, or start one with "
                         "`railgang devcluster up`", path=str(conf))
    return conf


def demo(
    ctx: typer.Context,
    jobs: Annotated[int, typer.Option("--jobs", min=1, max=500, help="How many jobs.")] = 30,
    seed: Annotated[int, typer.Option(help="Seed of the workload mix.")] = 1,
    step_s: Annotated[float, typer.Option("--step-s", min=0.01,
                                          help="Seconds per training step on one replica.")] = 1.0,
    out: Annotated[Path, typer.Option(help="Directory for the jobs' output files.")]
        = Path("/tmp/railgang-demo"),
    wave_gap: Annotated[float, typer.Option("--wave-gap", min=0,
                                            help="Seconds between the batch wave and the "
                                                 "guaranteed (class 0-2) wave.")] = 20.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the sbatch lines only.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Submit a reproducible mix of hinted training jobs to the cluster in SLURM_CONF.

    1-32 GPUs, tp/pp/dp shapes, elastic ranges and classes 0-3; each job runs the example
    training job (railgang.demo.train_example)."""
    workload = make_workload(jobs, seed)
    if dry_run:
        import shlex
        import sys

        argvs = [job.sbatch_argv(sys.executable, str(out), step_s) for job in workload]
        emit([{"name": job.name, "argv": argv} for job, argv in zip(workload, argvs, strict=True)],
             as_json, [shlex.join(argv) for argv in argvs])
        return
    os.environ["SLURM_CONF"] = str(_slurm_conf(settings_from(ctx)))
    out.mkdir(parents=True, exist_ok=True)
    try:
        submitted = submit(workload, out_dir=str(out), step_s=step_s, wave_gap_s=wave_gap)
    except (RuntimeError, OSError) as exc:
        raise InputError(str(exc)) from exc
    if as_json:
        typer.echo(json.dumps([{"job_id": jid, "name": j.name, "account": j.account,
                                "gpus": j.gpus, "nodes": j.nodes, "tp": j.tp, "pp": j.pp,
                                "dp": j.dp, "elastic": j.elastic, "class": j.priority_class}
                               for j, jid in submitted], indent=2))
        return
    table = Table("job", "name", "account", "GPUs", "shape", "elastic", "class")
    for j, jid in submitted:
        table.add_row(jid, j.name, j.account, str(j.gpus), f"tp{j.tp} pp{j.pp} dp{j.dp}",
                      f"{j.elastic[0]}:{j.elastic[1]}" if j.elastic else "-", str(j.priority_class))
    console.print(table)
    console.print(f"submitted {len(submitted)} jobs; output in {out}; watch with `railgang top`")


__all__ = ["demo"]
