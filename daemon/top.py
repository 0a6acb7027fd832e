"""``railgang top``: a live view of leaves, nodes and jobs, the way the daemon sees the cluster.

One frame is a pure function of three Slurm reads (``squeue --json``, ``sinfo --json``,
``scontrol show topology``), so ``--once`` and ``--json`` print exactly what the live view shows.
Nodes are grouped by leaf switch; each node shows its GPUs as cells, one letter per job, so a gang
that spans leaves is visible at a glance. Jobs are listed with their railgang shape and class;
multi-node running jobs also show how many leaves they span.
"""

from __future__ import annotations

import json
import os
import string
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from railgang.daemon.cli_common import JsonOpt, settings_from
from railgang.daemon.config import Settings
from railgang.daemon.errors import InputError, RailgangError
from railgang.daemon.slurm.cli.records import (
    ACTIVE_STATES,
    PENDING_STATES,
    SinfoNode,
    SqueueJob,
    parse_sinfo,
    parse_squeue,
    topology_from_show,
)
from railgang.daemon.slurm.cli.runner import SlurmRunner
from railgang.topology.conf import TopologyError, parse_topology

LETTERS = string.ascii_uppercase + string.ascii_lowercase + string.digits


@dataclass(frozen=True)
class NodeView:
    name: str
    gpus: int
    state: str
    owners: tuple[str, ...]  # job id per GPU index, "" where free


@dataclass(frozen=True)
class JobView:
    job_id: str
    name: str
    account: str
    state: str
    reason: str
    gpus: int
    nodes: tuple[str, ...]
    leaves: int  # leaves the job spans (0 while pending)
    shape: str  # "tp8 pp1 dp2", "" for a plain Slurm job
    klass: int | None
    elastic: str


@dataclass(frozen=True)
class Frame:
    leaves: dict[str, list[NodeView]]
    jobs: list[JobView]
    gpus_total: int = 0
    gpus_used: int = 0
    problems: list[str] = field(default_factory=list)


def _shape(tp: int, pp: int, dp: int) -> str:
    """``tp8 dp2``: degrees of 1 left out, so the column stays narrow."""
    return " ".join(f"{k}{v}" for k, v in (("tp", tp), ("pp", pp), ("dp", dp)) if v > 1) or "1 GPU"


def leaves_of(topology_text: str) -> dict[str, list[str]]:
    """Leaf switch -> its nodes (switches that list nodes directly)."""
    conf = parse_topology(topology_text, "scontrol show topology")
    return {sw.name: list(sw.nodes) for sw in conf.switches if sw.nodes}


def build_frame(jobs: Iterable[SqueueJob], nodes: Iterable[SinfoNode],
                leaves: Mapping[str, list[str]], problems: Iterable[str] = (),
                reasons: Mapping[str, str] | None = None) -> Frame:
    """Pure: Slurm records + leaves -> what one screen shows. ``reasons``: the daemon's pending
    reason per job (from its database); without it a waiting job shows Slurm's own reason."""
    reasons = reasons or {}
    node_map = {n.name: n for n in nodes}
    owner: dict[str, list[str]] = {n.name: [""] * n.gpus for n in node_map.values()}
    leaf_of = {n: leaf for leaf, members in leaves.items() for n in members}
    views = []
    for j in jobs:
        if j.state not in ACTIVE_STATES and j.state not in PENDING_STATES:
            continue
        held = tuple(n for n, _ in j.allocation)
        for n, gpus in j.allocation:
            for g in gpus:
                if n in owner and 0 <= g < len(owner[n]):
                    owner[n][g] = j.job_id
        t = j.tag
        views.append(JobView(
            job_id=j.job_id, name=j.name, account=j.account, state=j.state,
            reason="" if j.state in ACTIVE_STATES else reasons.get(j.job_id, j.reason),
            gpus=sum(len(g) for _, g in j.allocation) or j.gpus_requested, nodes=held,
            leaves=len({leaf_of.get(n, n) for n in held}),
            shape=_shape(t.tp, t.pp, t.dp) if t and t.dp else "",
            klass=t.klass if t else None,
            elastic=f"{t.elastic[0]}:{t.elastic[1]}" if t and t.elastic else ""))
    grouped: dict[str, list[NodeView]] = {}
    for leaf, members in [*leaves.items(), ("(no leaf)", [n for n in node_map if n not in leaf_of])]:
        row = [NodeView(n, node_map[n].gpus, node_map[n].state, tuple(owner[n]))
               for n in members if n in node_map]
        if row:
            grouped[leaf] = row
    total = sum(n.gpus for n in node_map.values() if n.state not in ("drain", "down"))
    used = sum(1 for cells in owner.values() for c in cells if c)
    views.sort(key=lambda v: (v.state not in ACTIVE_STATES, int(v.job_id) if v.job_id.isdigit()
                              else 0))
    return Frame(grouped, views, total, used, list(problems))


def render(frame: Frame) -> Group:
    letter = {v.job_id: LETTERS[i % len(LETTERS)] for i, v in
              enumerate(v for v in frame.jobs if v.nodes)}
    grid = Table.grid(padding=(0, 2))
    for leaf, nodes in frame.leaves.items():
        cells = Text(f"{leaf:>8} ", style="bold")
        for n in nodes:
            cells.append(f"{n.name} ")
            for o in n.owners:
                cells.append(letter.get(o, "·") if o else "·",
                             style="green" if o else ("red" if n.state in ("drain", "down")
                                                      else "dim"))
            cells.append("  ")
        grid.add_row(cells)
    jobs = Table(box=None, header_style="bold")
    for title in ("", "job", "name", "account", "state", "GPUs", "shape", "class", "elastic",
                  "nodes", "leaves", "reason"):
        jobs.add_column(title, no_wrap=True, overflow="ellipsis")
    for v in frame.jobs:
        state = "run" if v.state in ACTIVE_STATES else "wait"
        jobs.add_row(letter.get(v.job_id, ""), v.job_id, v.name, v.account, state, str(v.gpus),
                     v.shape, "" if v.klass is None else str(v.klass), v.elastic,
                     ",".join(v.nodes[:4]) + ("…" if len(v.nodes) > 4 else ""),
                     str(v.leaves or ""), v.reason)
    head = Text(f"GPUs in use {frame.gpus_used}/{frame.gpus_total}   jobs running "
                f"{sum(v.state in ACTIVE_STATES for v in frame.jobs)}   waiting "
                f"{sum(v.state in PENDING_STATES for v in frame.jobs)}", style="bold")
    parts: list[Any] = [head, grid, jobs]
    parts += [Text(p, style="yellow") for p in frame.problems]
    return Group(*parts)


def daemon_reasons(db_url: str) -> dict[str, str]:
    """The daemon's latest pending reasons; empty when its database is absent or unreadable (the
    view works without a daemon)."""
    from sqlalchemy.exc import SQLAlchemyError

    from railgang.db.repositories import explanations
    from railgang.db.session import make_engine, session_scope

    try:
        engine = make_engine(db_url)
        with session_scope(engine) as s:
            return explanations.waiting_reasons(s)
    except (SQLAlchemyError, RailgangError):
        return {}


def observe(runner: SlurmRunner, db_url: str | None = None) -> Frame:
    """Three Slurm reads (and the daemon's reasons, when ``db_url`` is given) -> one frame."""
    jobs, p1 = parse_squeue(runner.run(["squeue", "--json"]).stdout)
    nodes, p2 = parse_sinfo(runner.run(["sinfo", "--json"]).stdout)
    text = runner.run(["scontrol", "show", "topology"]).stdout
    try:
        leaves = leaves_of(topology_from_show(text)) if text.strip() else {}
    except TopologyError as exc:
        p2 = [*p2, f"topology: {exc}"]
        leaves = {}
    reasons = daemon_reasons(db_url) if db_url else {}
    return build_frame(jobs, nodes, leaves, [*p1, *p2], reasons)


def _slurm_conf(s: Settings) -> Path | None:
    if os.environ.get("SLURM_CONF"):
        return Path(os.environ["SLURM_CONF"])
    if s.slurm.conf is not None:
        return s.slurm.conf
    dev = s.devcluster.dir / "etc" / "slurm.conf"
    return dev if dev.is_file() else None


def top(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
    interval: Annotated[float, typer.Option(min=0.5, help="Seconds between frames.")] = 2.0,
    as_json: JsonOpt = False,
) -> None:
    """Live view of leaves, nodes (one cell per GPU, one letter per job) and jobs.

    --once prints one frame; --json prints one frame as JSON. Both exit after it."""
    settings = settings_from(ctx)
    conf = _slurm_conf(settings)
    if conf is None:
        raise InputError("no Slurm cluster: export SLURM_CONF, set slurm.conf, or start one with "
                         "`railgang devcluster up`")
    runner = SlurmRunner.from_settings(settings.slurm.model_copy(update={"conf": conf}))
    url = settings.db.url
    if as_json:
        typer.echo(json.dumps(asdict(observe(runner, url)), indent=2))
        return
    console = Console()
    if not console.is_terminal:  # a log or a pipe: Rich's 80-column default would cut job ids
        console = Console(width=140)
    if once:
        console.print(render(observe(runner, url)))
        return
    with Live(render(observe(runner, url)), console=console, screen=False,
              auto_refresh=False) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(render(observe(runner, url)), refresh=True)
        except KeyboardInterrupt:
            pass


__all__ = ["Frame", "JobView", "NodeView", "build_frame", "leaves_of", "observe", "render", "top"]
