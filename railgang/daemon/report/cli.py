"""``railgang report --date D | --from D1 --to D2 --out DIR [--json]``: build the utilisation
report of one UTC day or of a range of days.

Exit codes (docs/cli.md): 0 written; 1 a malformed date, an unwritable ``--out``, or a database
that is unreachable or not at head (``railgang db upgrade``); 3 the day has no data.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from railgang.daemon.cli.common import JsonOpt, emit, settings_from
from railgang.errors import InputError

if TYPE_CHECKING:  # pydantic-settings is imported when settings are read, not by --help
    from railgang.daemon.config import Settings


def load_fabric_for(settings: Settings):  # type: ignore[no-untyped-def]
    """The cluster's topology.conf when configured (fragmentation across leaves), else None:
    the report then treats each pool as one leaf."""
    path = settings.slurm.topology
    if path is None:
        return None
    from railgang.topology.conf import TopologyError
    from railgang.topology.fabric import load_fabric

    try:
        return load_fabric(path)
    except (TopologyError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read topology: {exc}", path=str(path),
                         field="slurm.topology") from exc


def report(
    ctx: typer.Context,
    date: Annotated[str | None, typer.Option(
        "--date", help="UTC day YYYY-MM-DD, or relative: yesterday, today-7d, now-1day "
                       "(default: yesterday).")] = None,
    first: Annotated[str | None, typer.Option(
        "--from", help="First UTC day of a range (with --to), YYYY-MM-DD or relative.")] = None,
    last: Annotated[str | None, typer.Option(
        "--to", help="Last UTC day of a range (included), YYYY-MM-DD or relative.")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Write report.html, report.json, report.csv and per-table CSVs here.")]
    = None,
    account: Annotated[str | None, typer.Option(
        "--account", "-A", "--team", help="Only these accounts (comma list), as sreport's "
        "Accounts=: their teams' rows, users, jobs and anomalies; a department or organisation "
        "stands for the teams under it.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Build the daily utilisation report: teams, pools, queue, cost of chaos, anomalies."""
    from railgang.daemon.report.render import to_json
    from railgang.daemon.report.service import (
        make_report,
        parse_day,
        parse_range,
        teams_under,
        write_day,
        yesterday,
    )
    from railgang.daemon.when import relative_day
    from railgang.db.migrate import engine_at_head
    from railgang.db.session import session_scope

    settings = settings_from(ctx)
    now = datetime.now(UTC)
    date, first, last = (relative_day(v, now, field=f) for v, f in  # daemon/when.py
                         ((date, "--date"), (first, "--from"), (last, "--to")))
    if (first is None) != (last is None):
        raise InputError("a range needs both --from and --to", field="--from" if first is None
                         else "--to")
    if first is not None and date is not None:
        raise InputError("give --date or --from/--to, not both", field="--date")
    day = (parse_range(first, last) if first is not None and last is not None
           else parse_day(date if date is not None else yesterday(now)))
    engine = engine_at_head(settings.db.url)
    fabric = load_fabric_for(settings)
    try:
        with session_scope(engine) as s:
            wanted = [a.strip() for a in (account or "").split(",") if a.strip()]
            teams = teams_under(s, wanted) if wanted else None
            if out is not None:
                rep, files = write_day(s, day, settings.report, out, now=now, fabric=fabric,
                                       teams=teams)
            else:
                rep, files = make_report(s, day, settings.report, now=now, fabric=fabric,
                                         teams=teams), []
    finally:
        engine.dispose()
    if as_json:
        typer.echo(to_json(rep))
        return
    t = rep.totals
    so_far = f" so far (until {datetime.fromtimestamp(rep.until, UTC):%H:%M} UTC)" \
        if rep.partial else ""
    lines = [f"report {rep.date}{so_far}: {t['allocated_gpu_h'] or 0:,.0f} of "
             f"{t['capacity_gpu_h'] or 0:,.0f} GPU-h allocated, {len(rep.teams)} teams, "
             f"{len(rep.anomalies)} anomalies in {len(rep.anomaly_groups)} groups"]
    # grouped and ranked (report/anomalies.grouped): the costliest groups, each with its count
    lines += [f"  {g.kind}: {g.team or 'fleet'}: {g.count} x"
              + (f", {g.cost:,.2f} {rep.currency} at stake" if g.cost is not None else "")
              + f"; costliest {g.subjects[0]}: {g.detail}" for g in rep.anomaly_groups[:10]]
    lines += [f"wrote {p}" for p in files[:1]] + ([f"  and {len(files) - 1} more files"]
                                                   if len(files) > 1 else [])
    emit(None, False, lines)


__all__ = ["load_fabric_for", "report"]
