"""``railgang sim``: replay a job trace through the decision core on a simulated cluster.

Every policy runs through the same ``run_cycle`` → ``decide`` → ``SimBackend`` path the daemon
uses with Slurm. Results go to stdout (a table, or ``--json``); the progress bar and warnings about
skipped rows go to stderr. Errors are ``RailgangError``s: one line, exit code 1; a policy or trace
format the registries do not know is a usage error (exit 2) listing the known ones.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from railgang.daemon.cli_common import JSON_HELP, choices_metavar, deprecated_alias, registry_choice
from railgang.daemon.core.model.plan import Policy
from railgang.daemon.core.policies import registry
from railgang.daemon.sim import traces
from railgang.daemon.sim.sweep.cli import with_sweep
from railgang.daemon.sim.traces import TraceJob, read_trace
from railgang.errors import ConfigError, InputError

if TYPE_CHECKING:  # the engine, pools and reports are imported by the command itself, so
    # `sim --help` does not pay for the fabric (networkx) (tests/daemon/test_cli_imports.py)
    from railgang.daemon.core.model.tiers import SpotRules

ALL_POLICIES = "fifo,slurm,tiresias,themis,pollux,default"


def build_fabric(topology: Path | None, nodes: int, gpus_per_node: int, leaf: int) -> Any:
    from railgang.topology.conf import TopologyError
    from railgang.topology.fabric import fabric_from_shape, load_fabric

    if topology is not None:
        try:
            return load_fabric(topology, default_gpus=gpus_per_node)
        except TopologyError as exc:
            first = exc.problems[0] if exc.problems else None
            raise InputError(str(exc) if first is None else first.message,
                             path=getattr(first, "path", str(topology)),
                             line=getattr(first, "line", None),
                             field=getattr(first, "field", None)) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read topology: {exc}", path=str(topology)) from exc
    if nodes < 1 or gpus_per_node < 1 or leaf < 1:
        raise ConfigError("--nodes, --gpus-per-node and --leaf must be positive")
    return fabric_from_shape(nodes, gpus_per_node, leaf)


def policy_for(name: str, type_blind: bool, rules: SpotRules) -> Policy:
    """The policy ``name``, type-blind or not, with the spot rules, where it takes them."""
    fields = {f.name for f in dataclasses.fields(registry.get(name))}  # type: ignore[arg-type]
    params: dict[str, Any] = {}
    if "hetero" in fields:
        params["hetero"] = not type_blind
    elif type_blind:
        raise ConfigError(f"--type-blind: policy {name} is type-blind already (it places as "
                          "Slurm does; the others place by GPU type)")
    if "spot" in fields:
        params["spot"] = rules
    return registry.get(name, **params)


def pool_table(policy: str, report: dict[str, Any]) -> Table:
    """Pools of a mixed or priced cluster: GPUs, GPU-hours, utilisation and cost."""
    table = Table(title=f"{policy}: pools (cost ${report['cost_usd']:,.0f}, "
                        f"{report['interruptions']} spot interruptions)")
    for col in ("pool", "GPUs", "GPU-h", "allocated", "cost $"):
        table.add_column(col, justify="left" if col == "pool" else "right")
    for kind in ("pools", "by_tier"):
        for name, row in report[kind].items():
            label = name if kind == "pools" else f"tier {name}"
            util = "-" if row["allocated"] is None else f"{row['allocated']:.1%}"
            table.add_row(label, str(row["gpus"]), f"{row['gpu_h']:,.0f}", util,
                          f"{row['cost_usd']:,.0f}")
    return table


def make_elastic(jobs: list[TraceJob]) -> list[TraceJob]:
    """Let every multi-replica job run anywhere from 1 replica up to its requested size."""
    return [dataclasses.replace(j, elastic_min=1, elastic_max=j.replicas)
            if j.replicas > 1 and j.elastic_min is None else j for j in jobs]


def policy_names(policy: str, compare: str | None) -> list[str]:
    known = registry.names()
    wanted = [p.strip() for p in (compare or policy).split(",") if p.strip()]
    unknown = [p for p in wanted if p not in known]
    if unknown or not wanted:
        raise ConfigError(f"unknown policy {', '.join(unknown) or '(none)'}; "
                          f"known: {', '.join(known)}")
    return list(dict.fromkeys(wanted))


# --format, --policy and --compare take the names the registries know (a usage error otherwise)
format_choice = registry_choice(traces.names)
policy_choice = registry_choice(registry.names)
policies_choice = registry_choice(registry.names, comma_list=True)


def sim(
    trace: Annotated[Path, typer.Option("--trace", help="Trace file or Philly trace directory.")],
    fmt: Annotated[str | None, typer.Option(
        "--format", callback=format_choice, metavar=choices_metavar(traces.names()),
        help="Trace format (default: the one that claims the path).")] = None,
    topology: Annotated[Path | None, typer.Option(
        "--topology", help="Slurm topology.conf for the cluster (instead of a shape).")] = None,
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes (shape cluster).")] = 64,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", help="GPUs per node.")] = 8,
    leaf: Annotated[int, typer.Option("--leaf", help="Nodes per leaf switch.")] = 8,
    policy: Annotated[str, typer.Option(
        "--policy", callback=policy_choice, metavar=choices_metavar(registry.names()),
        help="Policy to replay.")] = "default",
    compare: Annotated[str | None, typer.Option(
        "--compare", callback=policies_choice,
        help=f"Comma list of policies, e.g. {ALL_POLICIES}; ratios against fifo.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    jobs_csv: Annotated[Path | None, typer.Option(
        "--jobs-csv", help="Write one row per job and policy.")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", min=1, help="Replay only the first N jobs (by submit time).")] = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Stop at the first malformed row instead of skipping it.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the decision rng.")] = 0,
    elastic: Annotated[bool, typer.Option(
        "--elastic", help="Treat every multi-GPU job as elastic in [1, requested] replicas.",
    )] = False,
    cycle_s: Annotated[float, typer.Option(
        "--cycle-s", min=0, help="Decision cycle quantum (0 = at every change).")] = 0.0,
    tick_s: Annotated[float, typer.Option(
        "--tick-s", min=0, help="Extra periodic cycles while jobs wait (0 = off).")] = 0.0,
    max_pending: Annotated[int | None, typer.Option(
        "--max-pending", min=1,
        help="Show the core at most N pending jobs per cycle, oldest first (like Slurm's "
             "bf_max_job_test); caps per-cycle work but changes what reordering policies see.",
    )] = None,
    panic_checkpoint: Annotated[bool, typer.Option(
        "--panic-checkpoint", help="A signalled job checkpoints within its grace time.")] = False,
    comm_share: Annotated[float, typer.Option(
        "--comm-share", min=0, max=0.95,
        help="All-reduce share of a multi-GPU job's step on its best placement.")] = 0.2,
    quotas: Annotated[Path | None, typer.Option(
        "--quotas", help="TOML quota tree (org, departments, teams = trace accounts, with "
                         "guarantee and burst limit): replay with quotas, borrowing and reclaim, "
                         "and report guarantee attainment per team.")] = None,
    measure_only: Annotated[bool, typer.Option(
        "--quotas-measure-only", help="With --quotas: report attainment against the tree but "
                                      "schedule without it (the baseline to compare with).",
    )] = False,
    gpus: Annotated[str | None, typer.Option(
        "--gpu-pools", help="Mixed cluster instead of --nodes: pools TYPE[:TIER]=GPUS, e.g. "
                            "v100=64,p100=64,k80=64 or v100=256,v100:spot=256 (tiers reserved, "
                            "on-demand, spot); each pool its own nodes and leaves.")] = None,
    old_gpus: Annotated[str | None, typer.Option(  # --gpus counts GPUs (place): one meaning
        "--gpus", hidden=True)] = None,
    type_blind: Annotated[bool, typer.Option(
        "--type-blind", help="Policies ignore GPU types (the pool with the most free GPUs); "
                             "the baseline of heterogeneity-aware allocation.")] = False,
    prices: Annotated[str | None, typer.Option(
        "--price", help="USD per GPU-hour, TYPE[:TIER]=USD,... (default: list prices; "
                        "reserved 0.6x, spot 0.35x on-demand).")] = None,
    spot_rate: Annotated[float, typer.Option(
        "--spot-rate", min=0, help="Spot reclaims per node per day (Poisson).")] = 0.0,
    spot_notice_s: Annotated[float, typer.Option(
        "--spot-notice-s", min=0, help="Notice before a spot reclaim (grace).")] = 120.0,
    spot_down_s: Annotated[float, typer.Option(
        "--spot-down-s", min=0, help="A reclaimed spot node is back after notice + this.")] = 600.0,
    spot_max_per_day: Annotated[float, typer.Option(
        "--spot-max-per-day", min=0, help="Jobs predicted to be interrupted more often than "
                                          "this a day go to on-demand.")] = 4.0,
    spot_cost_blind: Annotated[bool, typer.Option(
        "--spot-cost-blind", help="Route to spot regardless of predicted interruptions (a "
                                  "baseline).")] = False,
    degrade: Annotated[str | None, typer.Option(
        "--degrade", help="Degrade links mid-trace: SWITCH@START[-END]:FACTOR[,...], e.g. "
                          "spine1@3h:0.3 (paths through spine1 at 30 % from 3 h on); running "
                          "gangs slow down and the core may migrate them (R-T8).")] = None,
    no_migrate: Annotated[bool, typer.Option(
        "--no-migrate", help="With --degrade: never migrate (the baseline).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    ledger: Annotated[str | None, typer.Option(
        "--ledger", metavar="DB_URL", help="Also store the replay as ledger segments and per-GPU "
        "telemetry in this database (docs/report.md), for `railgang report`.")] = None,
    ledger_start: Annotated[str | None, typer.Option(
        "--ledger-start", help="With --ledger: UTC day (YYYY-MM-DD, or relative: today-7d, "
                               "yesterday) of trace time 0.")] = None,
    telemetry_interval_s: Annotated[float, typer.Option(
        "--telemetry-interval-s", help="With --ledger: seconds between GPU samples.")] = 60.0,
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="With --ledger: write without asking, however many samples.")]
    = False,
    serving: Annotated[Path | None, typer.Option(
        "--serving", help="Serving demand CSV (time_s,deployment,replicas,tp; docs/serving.md): "
                          "replay it beside the trace, its pool lent to training by forecast; "
                          "--nodes counts the training nodes.")] = None,
    serving_modes: Annotated[str, typer.Option(
        "--serving-modes", help="With --serving: static, forecast, reactive (comma list).")]
    = "static,forecast",
    serving_history_days: Annotated[int, typer.Option(
        "--serving-history-days", min=3, max=366,
        help="With --serving: days of demand before the window (the forecast's history).")] = 10,
    serving_buffer_gpus: Annotated[float | None, typer.Option(
        "--serving-buffer-gpus", min=0, help="With --serving: a fixed buffer per deployment "
                                             "instead of the forecast-error quantile.")] = None,
    serving_quantile: Annotated[float, typer.Option(
        "--serving-quantile", min=0.5, max=0.9999,
        help="With --serving: the buffer is this quantile of the held-back error.")] = 0.99,
    serving_notice_s: Annotated[float, typer.Option(
        "--serving-notice-s", min=0, max=3600,
        help="With --serving: grace a borrower gets to checkpoint at a take-back.")] = 300.0,
) -> None:
    """Replay a job trace through the decision core on a simulated cluster."""
    from railgang.daemon.core.cycle import CycleConfig
    from railgang.daemon.core.model.tiers import SpotRules
    from railgang.daemon.core.phases.migrate import MigrationRules
    from railgang.daemon.pricing import parse_prices
    from railgang.daemon.sim.backend import SimConfig
    from railgang.daemon.sim.capacity import Capacity, pool_report
    from railgang.daemon.sim.degrade import parse_degrade
    from railgang.daemon.sim.engine import EngineConfig, RunResult, simulate
    from railgang.daemon.sim.pools import mixed_cluster, parse_pools
    from railgang.daemon.sim.progress import TopologyComm
    from railgang.daemon.sim.quotas import load_quotas, quota_report, quota_table
    from railgang.daemon.sim.report import (
        account_table,
        fairness_table,
        idle_table,
        ratio_table,
        ratios,
        results_tables,
        to_json,
        write_jobs_csv,
    )

    err = Console(stderr=True)
    out = Console()
    if not out.is_terminal:
        out = Console(width=160)
    names = policy_names(policy, compare)
    loaded = read_trace(trace, fmt, strict=strict, limit=limit)  # --limit: streamed, read no further
    for problem in loaded.problems[:10]:
        err.print(f"[yellow]skipped[/] {problem.render()}", highlight=False, soft_wrap=True)
    if len(loaded.problems) > 10:
        err.print(f"[yellow]skipped[/] {len(loaded.problems) - 10} more malformed rows")
    for note in loaded.notes:
        err.print(f"[dim]note:[/] {note}", highlight=False)
    jobs = list(loaded.jobs[:limit] if limit else loaded.jobs)
    if elastic:
        jobs = make_elastic(jobs)
    if not jobs:
        raise InputError("no valid jobs in the trace", path=str(trace))
    if measure_only and quotas is None:
        raise ConfigError("--quotas-measure-only needs --quotas FILE (the tree to measure against)")
    tree = load_quotas(quotas) if quotas is not None else None
    mixed = None
    gpus = deprecated_alias(gpus, old_gpus, "--gpus", "--gpu-pools")
    if gpus is not None:
        if topology is not None:
            raise ConfigError("--gpu-pools builds the cluster: leave out --topology")
        mixed = mixed_cluster(parse_pools(gpus, gpus_per_node), gpus_per_node, leaf,
                              prices=parse_prices(prices), spot_per_node_day=spot_rate,
                              spot_notice_s=spot_notice_s)
        fabric = mixed.fabric
    else:
        fabric = build_fabric(topology, nodes, gpus_per_node, leaf)
    config = EngineConfig(sim=SimConfig(comm_share=comm_share, panic_checkpoint=panic_checkpoint,
                                        quotas=tree, enforce_quotas=not measure_only,
                                        node_tier=mixed.node_tier if mixed else {},
                                        tiers=mixed.tiers if mixed else {},
                                        spot_down_s=spot_down_s, spot_seed=seed),
                          cycle_s=cycle_s, tick_s=tick_s, seed=seed, max_pending=max_pending)
    if degrade:
        try:
            events = parse_degrade(degrade, fabric.switches, min(j.submit_time for j in jobs))
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        moving = MigrationRules(enabled=not no_migrate, checkpoint_on_signal=panic_checkpoint)
        config = dataclasses.replace(config, sim=dataclasses.replace(config.sim, degrade=events),
                                     cycle=CycleConfig(migration=moving))
    elif no_migrate:
        raise ConfigError("--no-migrate needs --degrade (nothing degrades, nothing migrates)")
    rules = SpotRules(max_interruptions_per_day=spot_max_per_day, cost_aware=not spot_cost_blind)
    if serving is not None:  # serving demand beside the trace: its own report (issue 19)
        from railgang.daemon.serving import sim_cli as serving_sim

        if topology is not None or mixed is not None or len(names) > 1 or ledger is not None:
            raise ConfigError("--serving replays one --policy on a shape cluster (--nodes): "
                              "leave out --topology, --gpu-pools, --compare and --ledger")
        knobs = serving_sim.knobs_from(serving_history_days, serving_buffer_gpus,
                                       serving_quantile, serving_notice_s)
        serving_sim.run(serving, jobs, policy_for(names[0], type_blind, rules), nodes=nodes,
                        gpus_per_node=gpus_per_node, leaf=leaf, modes=serving_modes, knobs=knobs,
                        config=config, as_json=as_json,
                        meta={"trace": str(trace), "policy": names[0], "seed": seed})
        return
    runs: list[RunResult] = []
    with Progress(TextColumn("{task.description:>10}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=quiet) as bar:
        for name in names:
            task = bar.add_task(name, total=len(jobs))

            def advance(done: int, _total: int, task: TaskID = task) -> None:
                bar.update(task, completed=done)

            runs.append(simulate(jobs, policy_for(name, type_blind, rules), fabric, config=config,
                                 comm=TopologyComm(fabric), on_progress=advance))
            bar.update(task, completed=len(jobs))
    if ledger is not None:  # one more replay, logging segments (daemon/sim/telemetry.py)
        if len(names) > 1:
            raise ConfigError("--ledger stores one replay: give --policy, not --compare")
        from railgang.daemon.sim.ledger_cli import write_sim_ledger
        from railgang.daemon.when import relative_day

        start = relative_day(ledger_start, datetime.now(UTC), field="--ledger-start")
        stats = write_sim_ledger(err, ledger, jobs, registry.get(names[0]), fabric, config,
                                 start=start, interval_s=telemetry_interval_s, seed=seed,
                                 yes=yes, quiet=quiet)
        if stats is not None:
            err.print(f"[dim]ledger: {stats.jobs:,} jobs, {stats.segments:,} segments, "
                      f"{stats.samples:,} GPU samples, {stats.step_timings:,} step timings[/]",
                      highlight=False)
    baseline = "fifo" if "fifo" in names and len(names) > 1 else None
    total_gpus = sum(fabric.facts(n).gpus for n in fabric.nodes)
    if jobs_csv is not None:
        write_jobs_csv(jobs_csv, runs, total_gpus)
    if as_json:
        shape = (f"--gpu-pools {gpus}, {gpus_per_node} per node, {leaf} per leaf" if mixed is not None
                 else str(topology) if topology else f"{nodes}x{gpus_per_node}, {leaf} per leaf")
        meta = {"trace": str(trace), "jobs": len(jobs), "skipped_rows": len(loaded.problems),
                "cluster": {"nodes": len(fabric.nodes), "gpus": total_gpus, "topology": shape},
                "elastic": elastic, "seed": seed}
        if mixed is not None:
            meta["type_blind"] = type_blind
        payload = to_json(runs, meta, baseline)
        if degrade:
            payload["degrade"], payload["migrate"] = degrade, not no_migrate
            for run in runs:
                payload["results"][run.policy]["migrations"] = run.migrations
        for run in runs:
            if mixed is not None:
                payload["results"][run.policy].update(
                    pool_report(run.records, Capacity(fabric, mixed.node_tier, mixed.tiers),
                                run.metrics.makespan_s))
        for run in runs:
            if run.quota_use is not None:
                payload["quotas_file"] = str(quotas)
                payload["quotas_enforced"] = not measure_only
                payload["results"][run.policy]["quotas"] = quota_report(run.records,
                                                                        run.quota_use)
        typer.echo(json.dumps(payload, indent=2))
        return
    title = (f"{len(jobs):,} jobs on {total_gpus} GPUs ({len(fabric.nodes)} nodes)"
             + (", elastic" if elastic else ""))
    for table in results_tables(runs, title):
        out.print(table)
    out.print(fairness_table(runs))
    out.print(idle_table(runs, total_gpus))
    if baseline is not None:
        out.print(ratio_table(ratios({r.policy: r.metrics for r in runs}, baseline), baseline))
    if len(runs) == 1:
        out.print(account_table(runs[0]))
    if mixed is not None:
        for run in runs:
            out.print(pool_table(run.policy, pool_report(
                run.records, Capacity(fabric, mixed.node_tier, mixed.tiers), run.metrics.makespan_s)))
    for run in runs:
        if run.quota_use is not None:
            out.print(quota_table(run.policy, quota_report(run.records, run.quota_use)))
    for run in runs:
        if run.unfinished_reasons:
            sample = "; ".join(list(run.unfinished_reasons.values())[:3])
            err.print(f"[yellow]{run.policy}:[/] {len(run.unfinished_reasons)} jobs unfinished "
                      f"({sample})", highlight=False, soft_wrap=True)
        rejected = run.metrics.rejected
        if rejected:
            err.print(f"[yellow]{run.policy}:[/] {rejected} jobs rejected (larger than the "
                      "cluster)", highlight=False)
        if run.failed_actions:
            failed = ", ".join(f"{k} x{v}" for k, v in run.failed_actions.most_common(5))
            err.print(f"[yellow]{run.policy}:[/] actions refused by the cluster: {failed}",
                      highlight=False, soft_wrap=True)
        if degrade:
            err.print(f"[dim]{run.policy}: {run.migrations} job(s) migrated off degraded links[/]",
                      highlight=False)
        err.print(f"[dim]{run.policy}: {run.cycles:,} cycles, {run.events:,} events, "
                  f"{run.wall_s:.1f} s, {len(jobs) / max(run.wall_s, 1e-9):,.0f} jobs/s[/]",
                  highlight=False)


# the `sim` component: this command, plus `sim sweep GRID.toml` (daemon/sim/sweep/)
sim_app = with_sweep(sim)
