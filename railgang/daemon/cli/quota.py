"""``railgang quota …``: the common admin actions, on the database directly (same repositories
and checks as the API, audited as ``cli:<user>``). ``railgang token …`` is ``tokens.py``."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from railgang.daemon.cli.common import (
    JsonOpt,
    choices_metavar,
    deprecated_alias,
    emit,
    registry_choice,
    settings_from,
)
from railgang.db.choices import CAPACITY_TIERS, GRANT_KINDS

if TYPE_CHECKING:  # --help imports neither SQLAlchemy nor the core (tests/daemon/test_cli_imports.py)
    from sqlalchemy.orm import Session

ANY_GPU = "*"  # railgang.daemon.core.model.quota.ANY_GPU (tests/daemon/test_cli_imports.py checks)

quota_app = typer.Typer(help="Quotas, priority-class grants, rates and quota events.",
                        no_args_is_help=True)

Level = Literal["org", "dept", "team"]  # the CHECK constraint of accounts.level
BurstOpt = Annotated[int | None, typer.Option(
    "--burst-limit", min=0, help="Burst limit in GPUs (omit: none).")]
# the old name (sim --limit counts jobs; one meaning per flag name): hidden, warns
OldLimitOpt = Annotated[int | None, typer.Option("--limit", min=0, hidden=True)]


def actor() -> str:
    return f"cli:{getpass.getuser()}"


@contextmanager
def session(ctx: typer.Context) -> Iterator[Session]:
    from railgang.db.migrate import engine_at_head
    from railgang.db.session import session_scope

    engine = engine_at_head(settings_from(ctx).db.url)
    try:
        with session_scope(engine) as s:
            yield s
    finally:
        engine.dispose()


@quota_app.command("tree")
def tree(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The organisation tree with each account's quotas."""
    from railgang.db.repositories import org

    with session(ctx) as s:
        data = [org.account_dict(a, org.quotas_of(s, a)) for a in org.list_accounts(s)]
    kids: dict[str | None, list[dict[str, Any]]] = {}
    for d in data:
        kids.setdefault(d["parent"], []).append(d)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for d in kids.get(parent, []):
            extra = "".join(f" {q['gpu_type']}:{q['guaranteed_gpus']}/{q['limit_gpus'] or '-'}"
                            for q in d["quotas"])
            lines.append(f"{'  ' * depth}{d['name']} ({d['level']}) guaranteed "
                         f"{d['guaranteed_gpus']} limit {d['limit_gpus'] or '-'}{extra}")
            walk(d["name"], depth + 1)

    walk(None, 0)
    emit(data, as_json, lines or ["(no accounts: railgang quota add ...)"])


@quota_app.command("add")
def add(ctx: typer.Context, name: str,
        level: Annotated[Level, typer.Option(help="org, dept or team")],
        parent: Annotated[str | None, typer.Option(help="Parent account.")] = None,
        guaranteed: Annotated[int, typer.Option(min=0)] = 0,
        limit: BurstOpt = None, old_limit: OldLimitOpt = None,
        as_json: JsonOpt = False) -> None:
    """Add an organisation, department or team (checked against the hierarchy)."""
    from railgang.db.repositories import org

    limit = deprecated_alias(limit, old_limit, "--limit", "--burst-limit")

    with session(ctx) as s:
        org.create_account(s, actor=actor(), name=name, level=level, parent=parent,
                           guaranteed_gpus=guaranteed, limit_gpus=limit)
    emit({"name": name, "level": level, "parent": parent, "guaranteed_gpus": guaranteed,
          "limit_gpus": limit}, as_json, f"added {level} {name}")


@quota_app.command("set")
def set_quota(ctx: typer.Context, account: str, guaranteed: Annotated[int, typer.Option(min=0)],
              limit: BurstOpt = None, old_limit: OldLimitOpt = None,
              gpu_type: Annotated[str, typer.Option(help="GPU type or pool; * = all")] = ANY_GPU,
              as_json: JsonOpt = False) -> None:
    """Set an account's guarantee and burst limit; refused (nothing written) if it breaks
    the hierarchy."""
    from railgang.db.repositories import org

    limit = deprecated_alias(limit, old_limit, "--limit", "--burst-limit")

    with session(ctx) as s:
        org.set_quota(s, actor=actor(), account=account, gpu_type=gpu_type,
                      guaranteed_gpus=guaranteed, limit_gpus=limit)
    emit({"account": account, "gpu_type": gpu_type, "guaranteed_gpus": guaranteed,
          "limit_gpus": limit}, as_json,
         f"{account} {gpu_type}: guaranteed {guaranteed}, limit {limit or '-'}")


@quota_app.command("effective")
def effective(ctx: typer.Context, team: str, gpu_type: Annotated[str, typer.Option()] = ANY_GPU,
              as_json: JsonOpt = False) -> None:
    """Q_eff of a team now, and which level of the tree binds it."""
    from railgang.db.repositories import org

    with session(ctx) as s:
        eq = org.effective(s, team, gpu_type)
    data = {"team": eq.team, "gpu_type": eq.gpu_type, "allocated": eq.allocated,
            "q_eff": eq.q_eff, "binding": eq.binding,
            "levels": [asdict(lv) for lv in eq.levels]}
    emit(data, as_json, [f"{team} ({gpu_type}): q_eff {eq.q_eff if eq.q_eff is not None else 'uncapped'}"
                          f", allocated {eq.allocated}, bound by {eq.binding or '-'}"])


@quota_app.command("grant")
def grant(ctx: typer.Context, class_id: Annotated[int, typer.Argument(min=0, max=3)],
          kind: Annotated[str, typer.Argument(
              callback=registry_choice(lambda: GRANT_KINDS), metavar=choices_metavar(GRANT_KINDS),
              help="Who is granted the class.")],
          subject: str, as_json: JsonOpt = False) -> None:
    """Allow an account, user or QOS to submit in priority class 0, 1 or 2."""
    from railgang.db.repositories import admin

    with session(ctx) as s:
        admin.grant(s, actor=actor(), class_id=class_id, kind=kind, subject=subject)
    emit({"class": class_id, "kind": kind, "subject": subject}, as_json,
         f"class {class_id} granted to {kind} {subject}")


@quota_app.command("grants-file")
def grants_file(ctx: typer.Context, path: Annotated[Path | None, typer.Argument(
        help="Where job_submit.lua reads it (default: ledger.grants_file).")] = None,
                as_json: JsonOpt = False) -> None:
    """Write the class grants file for job_submit.lua (atomic; unchanged grants = no write)."""
    from railgang.db.repositories import admin
    from railgang.topology.inputs import write_if_changed

    target = path or settings_from(ctx).ledger.grants_file
    with session(ctx) as s:
        text = admin.grants_file_text(s)
    written = write_if_changed(target, text)  # slurmctld never reads a half-written file
    emit({"path": str(target), "written": written}, as_json,
         f"{target}: {'written' if written else 'unchanged'}")


@quota_app.command("rate")
def rate(ctx: typer.Context, gpu_type: str,
         capacity: Annotated[str, typer.Argument(
             callback=registry_choice(lambda: CAPACITY_TIERS),
             metavar=choices_metavar(CAPACITY_TIERS), help="Capacity tier.")],
         per_gpu_hour: float, as_json: JsonOpt = False) -> None:
    """Set the price of one GPU-hour of GPU_TYPE on CAPACITY."""
    from railgang.db.repositories import admin

    with session(ctx) as s:
        admin.set_rate(s, actor=actor(), gpu_type=gpu_type, capacity=capacity,
                       per_gpu_hour=per_gpu_hour)
    emit({"gpu_type": gpu_type, "capacity": capacity, "per_gpu_hour": per_gpu_hour}, as_json,
         f"rate {gpu_type}/{capacity}: {per_gpu_hour}/GPU-hour")


@quota_app.command("decide")
def decide(ctx: typer.Context, event_id: int,
           approve: Annotated[bool, typer.Option("--approve/--reject")],
           as_json: JsonOpt = False) -> None:
    """Approve or reject a use-it-or-lose-it proposal."""
    from railgang.db.repositories import admin

    with session(ctx) as s:
        e = admin.decide_event(s, actor=actor(), event_id=event_id, approve=approve)
        state = e.state
    emit({"event": event_id, "state": state}, as_json, f"event {event_id}: {state}")


@quota_app.command("sync-accounts")
def sync_accounts(ctx: typer.Context,
                  dry_run: Annotated[bool, typer.Option(help="Print the sacctmgr calls only.")]
                  = False, as_json: JsonOpt = False) -> None:
    """Create/move the tree's accounts in Slurm (sacctmgr -i, argument lists)."""
    from railgang.daemon.ledger.slurm_accounts import plan, read_slurm_accounts
    from railgang.daemon.slurm.cli.runner import SlurmRunner
    from railgang.db.repositories import org

    runner = SlurmRunner.from_settings(settings_from(ctx).slurm)
    with session(ctx) as s:
        wanted = [(a.name, a.parent.name if a.parent else None, a.level, a.limit_gpus)
                  for a in org.list_accounts(s)]
    calls = plan(wanted, read_slurm_accounts(runner))
    for argv in calls:
        if not as_json:
            typer.echo(" ".join(argv))
        if not dry_run:
            runner.run(argv)
    if as_json:
        emit({"calls": [list(argv) for argv in calls], "dry_run": dry_run}, True, "")
        return
    typer.echo(f"{len(calls)} sacctmgr call(s){' (dry run)' if dry_run else ''}")


__all__ = ["actor", "quota_app", "session"]
