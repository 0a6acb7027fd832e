"""``railgang top``: a live view of leaves, nodes and jobs, the way the daemon sees the cluster.

One frame is a pure function of three Slurm reads (``squeue --json``, ``sinfo --json``,
``scontrol show topology``), so ``--once`` and ``--json`` print exactly what the live view shows.
Nodes are grouped by leaf switch; each node shows its GPUs as cells, one letter per job, so a gang
that spans leaves is visible at a glance. Jobs are listed with their railgang shape and class;
multi-node running jobs also show how many leaves they span.

Filters as squeue's: ``-u/--user``, ``--me``, ``-A/--account`` (comma lists) keep the jobs listed
(the GPUs of the others show as ``▪``); ``-o/--format`` picks the job columns. Without a Slurm
cluster to read, or with ``slurm.backend = "sim"``, the frame comes from the daemon's database
(the core's latest word on each job, ``railgang explain``'s source): jobs only, no node grid.
"""

from __future__ import annotations

import getpass
import json
import os
import string
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from railgang.daemon.cli.common import JsonOpt, choices_metavar, registry_choice, settings_from
from railgang.daemon.core.model.snapshot import NodeState
from railgang.daemon.safe_output import term_safe, term_text
from railgang.errors import InputError, RailgangError

if TYPE_CHECKING:  # `top --help` imports neither the Slurm adapter nor networkx
    from railgang.daemon.config import Settings
    from railgang.daemon.slurm.cli.records import SinfoNode, SqueueJob
    from railgang.daemon.slurm.cli.runner import SlurmRunner

LETTERS = string.ascii_uppercase + string.ascii_lowercase + string.digits
COLUMNS = ("job", "name", "user", "account", "state", "gpus", "shape", "class", "elastic", "nodes",
           "leaves", "reason")
Source = Literal["auto", "slurm", "daemon"]


@dataclass(frozen=True)
class NodeView:
    name: str
    gpus: int
    state: NodeState
    owners: tuple[str, ...]  # job id per GPU index, "" where free


@dataclass(frozen=True)
class JobView:
    job_id: str
    name: str
    account: str
    state: str
    user: str = field(default="", kw_only=True)  # "" when the source does not say (the daemon's)
    reason: str
    gpus: int
    nodes: tuple[str, ...]
    leaves: int  # leaves the job spans (0 while pending)
    shape: str  # "tp8 pp1 dp2", "" for a plain Slurm job
    priority_class: int | None
    elastic: str


@dataclass(frozen=True)
class Frame:
    leaves: dict[str, list[NodeView]]
    jobs: list[JobView]
    gpus_total: int = 0  # 0: unknown (the daemon's database keeps no fleet size)
    gpus_used: int = 0  # the whole fleet's, as the grid shows it
    problems: list[str] = field(default_factory=list)
    gpus_shown: int | None = None  # the listed jobs' GPUs when -u/-A/--me filter them


def _shape(tp: int, pp: int, dp: int) -> str:
    """``tp8 dp2``: degrees of 1 left out, so the column stays narrow."""
    return " ".join(f"{k}{v}" for k, v in (("tp", tp), ("pp", pp), ("dp", dp)) if v > 1) or "1 GPU"


def leaves_of(topology_text: str) -> dict[str, list[str]]:
    """Leaf switch (or block) -> its nodes, from the fabric the daemon builds of the same text
    (``fabric.fabric_from_text``), so the grid groups nodes as placement sees them."""
    from railgang.topology.fabric import fabric_from_text

    fabric = fabric_from_text(topology_text, "scontrol show topology", empty_ok=True)
    return {leaf: list(fabric.direct_nodes(leaf)) for leaf in fabric.leaves}


def build_frame(jobs: Iterable[SqueueJob], nodes: Iterable[SinfoNode],
                leaves: Mapping[str, list[str]], problems: Iterable[str] = (),
                reasons: Mapping[str, str] | None = None) -> Frame:
    """Pure: Slurm records + leaves -> what one screen shows. ``reasons``: the daemon's pending
    reason per job (from its database); without it a waiting job shows Slurm's own reason."""
    from railgang.daemon.slurm.cli.records import ACTIVE_STATES, PENDING_STATES

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
            job_id=j.job_id, name=j.name, account=j.account, state=j.state, user=j.user,
            reason="" if j.state in ACTIVE_STATES else reasons.get(j.job_id, j.reason),
            gpus=sum(len(g) for _, g in j.allocation) or j.gpus_requested, nodes=held,
            leaves=len({leaf_of.get(n, n) for n in held}),
            shape=_shape(t.tp, t.pp, t.dp) if t and t.dp else "",
            priority_class=t.priority_class if t else None,
            elastic=f"{t.elastic[0]}:{t.elastic[1]}" if t and t.elastic else ""))
    grouped: dict[str, list[NodeView]] = {}
    for leaf, members in [*leaves.items(), ("(no leaf)", [n for n in node_map if n not in leaf_of])]:
        row = [NodeView(n, node_map[n].gpus, node_map[n].state, tuple(owner[n]))
               for n in members if n in node_map]
        if row:
            grouped[leaf] = row
    total = sum(n.gpus for n in node_map.values() if n.state.usable)
    used = sum(1 for cells in owner.values() for c in cells if c)
    views.sort(key=lambda v: (v.state not in ACTIVE_STATES, int(v.job_id) if v.job_id.isdigit()
                              else 0))
    return Frame(grouped, views, total, used, list(problems))


def select(frame: Frame, users: Iterable[str] = (), accounts: Iterable[str] = ()) -> Frame:
    """The frame with only the jobs of these users and accounts (empty: any), as squeue -u/-A."""
    from railgang.daemon.slurm.cli.records import ACTIVE_STATES

    users, accounts = set(users), set(accounts)
    if not users and not accounts:
        return frame
    jobs = [v for v in frame.jobs
            if (not users or v.user in users) and (not accounts or v.account in accounts)]
    shown = sum(v.gpus for v in jobs if v.state in ACTIVE_STATES)
    return Frame(frame.leaves, jobs, frame.gpus_total, frame.gpus_used, frame.problems, shown)


def _cell(v: JobView, column: str) -> str:
    from railgang.daemon.slurm.cli.records import ACTIVE_STATES

    state = "run" if v.state in ACTIVE_STATES else "wait"
    return {"job": v.job_id, "name": v.name, "user": v.user, "account": v.account, "state": state,
            "gpus": str(v.gpus), "shape": v.shape,
            "class": "" if v.priority_class is None else str(v.priority_class), "elastic": v.elastic,
            "nodes": ",".join(v.nodes[:4]) + ("…" if len(v.nodes) > 4 else ""),
            "leaves": str(v.leaves or ""), "reason": v.reason}[column]


def render(frame: Frame, columns: Iterable[str] = COLUMNS) -> Group:
    from railgang.daemon.slurm.cli.records import ACTIVE_STATES, PENDING_STATES

    letter = {v.job_id: LETTERS[i % len(LETTERS)] for i, v in
              enumerate(v for v in frame.jobs if v.nodes)}
    grid = Table.grid(padding=(0, 2))
    for leaf, nodes in frame.leaves.items():
        cells = Text(f"{term_safe(leaf):>8} ", style="bold")
        for n in nodes:
            cells.append(f"{term_safe(n.name)} ")
            for o in n.owners:  # ▪: a job the filters leave out
                cells.append(letter.get(o, "▪") if o else "·",
                             style="green" if o else ("dim" if n.state.usable else "red"))
            cells.append("  ")
        grid.add_row(cells)
    jobs = Table(box=None, header_style="bold")
    columns = list(columns)
    for title in ("", *("GPUs" if c == "gpus" else c for c in columns)):
        jobs.add_column(title, no_wrap=True, overflow="ellipsis")
    for v in frame.jobs:
        # a job's name and account are its owner's text: shown, never obeyed (safe_output)
        jobs.add_row(letter.get(v.job_id, ""), *(term_text(_cell(v, c)) for c in columns))
    in_use = f"{frame.gpus_used}/{frame.gpus_total}" if frame.gpus_total else str(frame.gpus_used)
    if frame.gpus_shown is not None:
        in_use += f", {frame.gpus_shown} by the jobs shown"
    head = Text(f"GPUs in use {in_use}   jobs running "
                f"{sum(v.state in ACTIVE_STATES for v in frame.jobs)}   waiting "
                f"{sum(v.state in PENDING_STATES for v in frame.jobs)}", style="bold")
    parts: list[Any] = [head, grid, jobs]
    parts += [term_text(p, style="yellow") for p in frame.problems]
    return Group(*parts)


def daemon_reasons(db_url: str) -> dict[str, str]:
    """The daemon's latest pending reasons; empty when its database is absent or unreadable (the
    view works without a daemon)."""
    from sqlalchemy.exc import SQLAlchemyError

    from railgang.db.repositories import explanations
    from railgang.db.session import make_engine, session_scope

    try:
        engine = make_engine(db_url)
    except RailgangError:
        return {}
    try:
        with session_scope(engine) as s:
            return explanations.waiting_reasons(s)
    except (SQLAlchemyError, RailgangError):
        return {}
    finally:
        engine.dispose()  # a pooled connection left to the collector: Python 3.13 warns


def from_daemon(db_url: str) -> Frame:
    """The daemon's view from its database (any backend, the simulator's too): its latest word
    on each live job; no node grid (the database keeps no GPU map)."""
    from sqlalchemy import select as sql_select
    from sqlalchemy.exc import SQLAlchemyError

    from railgang.daemon.slurm.cli.records import ACTIVE_STATES
    from railgang.db.models import JobExplanation
    from railgang.db.session import make_engine, session_scope
    from railgang.topology import hostnames

    engine = None
    try:
        engine = make_engine(db_url)
        with session_scope(engine) as s:
            rows = s.execute(sql_select(JobExplanation).where(JobExplanation.state != "gone")
                             ).scalars().all()
            views = [JobView(
                job_id=r.job_id, name="", account=r.account,
                state="RUNNING" if r.state == "running" else "PENDING",
                reason=r.reason or "" if r.state == "waiting" else "", gpus=r.gpus,
                nodes=hostnames.expand(r.nodes), leaves=0,
                shape="", priority_class=r.priority_class, elastic="") for r in rows]
    except (SQLAlchemyError, RailgangError) as exc:
        raise InputError(f"the daemon's database: {_db_problem(db_url, exc)}") from exc
    finally:
        if engine is not None:
            engine.dispose()
    views.sort(key=lambda v: (v.state not in ACTIVE_STATES, int(v.job_id) if v.job_id.isdigit()
                              else 0))
    used = sum(v.gpus for v in views if v.state in ACTIVE_STATES)
    return Frame({}, views, 0, used, ["the daemon's view from its database: no node grid, no "
                                      "users (read Slurm for those)"])


def _db_problem(db_url: str, exc: Exception) -> str:
    """One line for a database that cannot be read: not migrated (the words every command uses),
    else the driver's own first line (SQLAlchemy's text adds the SQL and a link)."""
    from sqlalchemy.exc import SQLAlchemyError

    from railgang.db.migrate import require_head

    try:
        require_head(db_url)
    except RailgangError as not_head:
        return str(not_head).splitlines()[0]
    except SQLAlchemyError:  # unreadable even for that: the query's own error says it
        pass
    first = str(getattr(exc, "orig", None) or exc).splitlines()
    return f"{first[0] if first else type(exc).__name__}; is the daemon running with this db.url?"


def observe(runner: SlurmRunner, db_url: str | None = None) -> Frame:
    """Three Slurm reads (and the daemon's reasons, when ``db_url`` is given) -> one frame."""
    from railgang.daemon.slurm.cli.records import parse_sinfo, parse_squeue, topology_from_show
    from railgang.topology.conf import TopologyError

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


def slurm_conf(s: Settings) -> Path | None:
    """The slurm.conf to read: $SLURM_CONF, slurm.conf, else the dev cluster's; None: no Slurm."""
    if os.environ.get("SLURM_CONF"):
        return Path(os.environ["SLURM_CONF"])
    if s.slurm.conf is not None:
        return s.slurm.conf
    dev = s.devcluster.dir / "etc" / "slurm.conf"
    return dev if dev.is_file() else None


def _comma(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def top(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
    interval: Annotated[float, typer.Option(min=0.5, help="Seconds between frames.")] = 2.0,
    user: Annotated[str | None, typer.Option(
        "--user", "-u", help="Only these users' jobs (comma list), as squeue -u.")] = None,
    me: Annotated[bool, typer.Option("--me", help="Only my jobs, as squeue --me.")] = False,
    account: Annotated[str | None, typer.Option(
        "--account", "-A", help="Only these accounts' jobs (comma list), as squeue -A.")] = None,
    columns: Annotated[str | None, typer.Option(
        "--format", "-o", callback=registry_choice(lambda: COLUMNS, comma_list=True),
        metavar=choices_metavar(COLUMNS), help="Job columns to show, a comma list in order "
        "(default: all).")] = None,
    source: Annotated[Source, typer.Option(
        help="slurm: squeue/sinfo/scontrol; daemon: the daemon's database (any backend, the "
             "simulator's too); auto: daemon when slurm.backend is sim or no Slurm is found."
    )] = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Live view of leaves, nodes (one cell per GPU, one letter per job) and jobs.

    --once prints one frame; --json prints one frame as JSON. Both exit after it."""
    settings = settings_from(ctx)
    users = _comma(user) + ([getpass.getuser()] if me else [])
    accounts = _comma(account)
    conf = slurm_conf(settings)
    if source == "auto":
        source = "daemon" if settings.slurm.backend == "sim" or conf is None else "slurm"
    if source == "slurm":
        from railgang.daemon.slurm.cli.runner import SlurmRunner

        if conf is None:
            raise InputError("no Slurm cluster: export SLURM_CONF, set slurm.conf, start one with "
                             "`railgang devcluster up`, or use --source daemon")
        runner = SlurmRunner.from_settings(settings.slurm.model_copy(update={"conf": conf}))
    url = settings.db.url

    def frame() -> Frame:
        whole = observe(runner, url) if source == "slurm" else from_daemon(url)
        return select(whole, users, accounts)

    if as_json:
        typer.echo(json.dumps(asdict(frame()), indent=2))
        return
    shown = _comma(columns) or COLUMNS
    console = Console()
    if not console.is_terminal:  # a log or a pipe: Rich's 80-column default would cut job ids
        console = Console(width=140)
    if once:
        console.print(render(frame(), shown))
        return
    with Live(render(frame(), shown), console=console, screen=False, auto_refresh=False) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(render(frame(), shown), refresh=True)
        except KeyboardInterrupt:
            pass


__all__ = ["COLUMNS", "Frame", "JobView", "NodeView", "build_frame", "from_daemon", "leaves_of",
           "observe", "render", "select", "slurm_conf", "top"]
