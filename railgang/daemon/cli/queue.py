"""``railgang queue``: the waiting jobs, as ``squeue -t PD`` lists them, with railgang's word on
each: its reason, priority class, place in the policy's order and expected start.

Nothing new is kept for it: the rows are the daemon's latest explanations (what ``railgang
explain JOBID`` reads, ``job_explanations``), joined with one ``squeue --json`` for the users and
partitions the database does not keep. A job squeue no longer lists as pending left the queue
after the daemon's last cycle and is not shown. Without a Slurm cluster to read (``slurm.backend
= "sim"``, or none found) the list is the database's alone, and ``-u``/``--me``/``-p`` cannot
filter (one line says so).
"""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Annotated, Any

import typer

from railgang.daemon.cli.common import JsonOpt, emit, settings_from
from railgang.errors import InputError

HEADER = ("JOBID", "PARTITION", "USER", "ACCOUNT", "CLASS", "GPUS", "POS", "START", "REASON")


def start_text(est: Any) -> str:
    """The expected start as ``explain`` says it, counted from now (``in 8 min``, ``never``)."""
    from railgang.daemon.when import from_now, span

    if not isinstance(est, dict):
        return ""
    made = est.get("age_s") or 0.0
    if est.get("status") == "estimated" and isinstance(est.get("start_s"), int | float):
        return from_now(est["start_s"] - made)
    if est.get("status") == "never":
        return "never"
    lower = est.get("not_before_s")
    return f"not before {span(lower - made)}" if isinstance(lower, int | float) else ""


def queue_rows(explained: Iterable[Mapping[str, Any]],
               slurm: Mapping[str, tuple[str, str]] | None, *, users: Collection[str] = (),
               accounts: Collection[str] = (), partitions: Collection[str] = ()
               ) -> list[dict[str, Any]]:
    """Pure: the daemon's waiting explanations + squeue's ``job -> (user, partition)`` of its
    pending jobs (None: no Slurm read) -> the rows, in the policy's order, filtered as squeue's
    ``-u``/``-A``/``-p`` (a job in several partitions matches any of them)."""
    rows = []
    for e in explained:
        user, partition = "", ""
        if slurm is not None:
            if e["job_id"] not in slurm:
                continue
            user, partition = slurm[e["job_id"]]
        if (users and user not in users) or (accounts and e["account"] not in accounts):
            continue
        if partitions and not set(partition.split(",")) & set(partitions):
            continue
        rows.append({"job_id": e["job_id"], "partition": partition, "user": user,
                     "account": e["account"], "priority_class": e["priority_class"],
                     "gpus": e["gpus"], "position": e.get("position"),
                     "queue_length": e.get("queue_length"), "reason": e.get("reason") or "",
                     "reason_text": e.get("reason_text", ""), "detail": e.get("detail", ""),
                     "start": start_text(e.get("estimate")), "estimate": e.get("estimate")})
    rows.sort(key=lambda r: (r["position"] is None, r["position"] or 0,
                             int(r["job_id"]) if r["job_id"].isdigit() else 0))
    return rows


def render_queue(rows: list[dict[str, Any]]) -> list[str]:
    """Columns under a header, as squeue prints them; users' text shown, never obeyed."""
    from railgang.daemon.safe_output import term_safe

    if not rows:
        return ["(no waiting jobs)"]
    table = [list(HEADER)]
    for r in rows:
        pos = "" if r["position"] is None else f"{r['position']}/{r['queue_length'] or '?'}"
        table.append([term_safe(str(v)) for v in (
            r["job_id"], r["partition"] or "-", r["user"] or "-", r["account"],
            r["priority_class"], r["gpus"], pos, r["start"] or "-", r["reason"])])
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]])
            for row in table]


def _waiting(db_url: str) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from railgang.daemon.service.status import as_dict
    from railgang.db.migrate import engine_at_head
    from railgang.db.models import JobExplanation
    from railgang.db.session import session_scope

    engine = engine_at_head(db_url)  # not migrated: the one line every command gives
    try:
        with session_scope(engine) as s:
            now = time.time()
            return [as_dict(r, now) for r in s.scalars(
                select(JobExplanation).where(JobExplanation.state == "waiting"))]
    finally:
        engine.dispose()


def _comma(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def queue(
    ctx: typer.Context,
    user: Annotated[str | None, typer.Option(
        "--user", "-u", help="Only these users' jobs (comma list), as squeue -u.")] = None,
    me: Annotated[bool, typer.Option("--me", help="Only my jobs, as squeue --me.")] = False,
    account: Annotated[str | None, typer.Option(
        "--account", "-A", help="Only these accounts' jobs (comma list), as squeue -A.")] = None,
    partition: Annotated[str | None, typer.Option(
        "--partition", "-p", help="Only jobs in these partitions (comma list), as squeue -p.")]
    = None,
    as_json: JsonOpt = False,
) -> None:
    """Waiting jobs in railgang's order, with reason, class, place and expected start."""
    from railgang.daemon.cli.top import slurm_conf

    settings = settings_from(ctx)
    users = _comma(user) | ({getpass.getuser()} if me else set())
    partitions = _comma(partition)
    conf = None if settings.slurm.backend == "sim" else slurm_conf(settings)
    slurm: dict[str, tuple[str, str]] | None = None
    if conf is not None:
        from railgang.daemon.slurm.cli.records import PENDING_STATES, parse_squeue
        from railgang.daemon.slurm.cli.runner import SlurmRunner

        runner = SlurmRunner.from_settings(settings.slurm.model_copy(update={"conf": conf}))
        jobs, _ = parse_squeue(runner.run(["squeue", "--json"]).stdout)
        slurm = {j.job_id: (j.user, j.partition) for j in jobs if j.state in PENDING_STATES}
    elif users or partitions:
        raise InputError("-u/--me/-p need squeue (users and partitions are Slurm's; the daemon's "
                         "database keeps neither): export SLURM_CONF or set slurm.conf")
    rows = queue_rows(_waiting(settings.db.url), slurm, users=users,
                      accounts=_comma(account), partitions=partitions)
    if as_json:
        typer.echo(json.dumps(rows, indent=2, default=str))
        return
    emit(None, False, render_queue(rows))


__all__ = ["HEADER", "queue", "queue_rows", "render_queue", "start_text"]
