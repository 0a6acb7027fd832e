"""What ``railgang sim`` does with its options: read the trace, build the cluster and the engine
configuration, replay each policy (or hand over to the serving replay), optionally store one
replay in a ledger, and print the results as tables or ``--json``.

The command (``sim/cli.py``) only declares the options; they arrive here as one namespace whose
attributes are the command's parameter names (``a.trace``, ``a.policy`` …), so each step below
reads what it needs instead of a function with forty arguments.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

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
from rich.text import Text

from railgang.daemon.cli.common import deprecated_alias
from railgang.daemon.core.cycle import CycleConfig
from railgang.daemon.core.model.plan import Policy
from railgang.daemon.core.model.tiers import SpotRules
from railgang.daemon.core.phases.migrate import MigrationRules
from railgang.daemon.core.policies import registry
from railgang.daemon.cycle_settings import CycleSetup
from railgang.daemon.pricing import parse_prices
from railgang.daemon.safe_output import term_safe
from railgang.daemon.sim.capacity import Capacity, pool_report
from railgang.daemon.sim.config import SimConfig
from railgang.daemon.sim.degrade import parse_degrade
from railgang.daemon.sim.engine import EngineConfig, RunResult, simulate
from railgang.daemon.sim.failures import daemon_steps, failure_config, failure_summary
from railgang.daemon.sim.pools import MixedCluster, mixed_cluster, parse_pools
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
from railgang.daemon.sim.settings import settings_setup
from railgang.daemon.sim.traces import TraceJob, read_trace
from railgang.errors import ConfigError, InputError


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


def policy_for(name: str, type_blind: bool, rules: SpotRules, fair_share: bool = False,
               setup: CycleSetup | None = None) -> Policy:
    """The policy ``name``, type-blind or not, with the spot rules and fair share (``--fair-share``),
    where it takes them; with ``setup`` (``--config``) also the settings' parameters."""
    fields = {f.name for f in dataclasses.fields(registry.get(name))}  # type: ignore[arg-type]
    params: dict[str, Any] = {"fair_share": True} if fair_share and "fair_share" in fields else {}
    if "hetero" in fields:
        params["hetero"] = not type_blind
    elif type_blind:
        raise ConfigError(f"--type-blind: policy {name} is type-blind already (it places as "
                          "Slurm does; the others place by GPU type)")
    if "spot" in fields:
        params["spot"] = rules
    if setup is not None:  # the daemon's own construction (cycle_settings.CycleSetup.policy)
        params.pop("fair_share", None)
        return dataclasses.replace(setup, fair_share=fair_share).policy(name, **params)
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


def replay(a: SimpleNamespace) -> None:
    """``railgang sim`` with the options ``a``."""
    err = Console(stderr=True)
    out = Console()
    if not out.is_terminal:
        out = Console(width=160)
    a.setup = settings_setup(a)  # --config: the daemon's cycle from its settings file
    for flag, value in (("--cycle-s", a.cycle_s), ("--tick-s", a.tick_s)):
        if not (value == 0 or 0.1 <= value <= 86400):  # (NaN fails too) 1e-9: endless ticks
            raise ConfigError(f"{flag} {value}: 0 (off) or 0.1 to 86400 seconds"
                              + (" (the file's daemon.cycle_interval_s)" if a.setup else ""))
    names = policy_names(a.policy, a.compare)
    jobs, skipped = _jobs(a, err)
    mixed, fabric = _cluster(a)
    config = _engine_config(a, jobs, fabric, mixed)
    rules = SpotRules(max_interruptions_per_day=a.spot_max_per_day, cost_aware=not a.spot_cost_blind)
    if a.serving is not None:  # serving demand beside the trace: its own report (issue 19)
        _serving(a, jobs, names, mixed, config, rules)
        return
    runs = _replays(a, jobs, names, fabric, config, rules, err)
    if a.ledger is not None:  # one more replay, logging segments (daemon/sim/telemetry.py)
        _ledger(a, jobs, policy_for(names[0], a.type_blind, rules, a.fair_share, a.setup), names,
                fabric, config, err)
    total_gpus = sum(fabric.facts(n).gpus for n in fabric.nodes)
    if a.jobs_csv is not None:
        write_jobs_csv(a.jobs_csv, runs, total_gpus)
    baseline = "fifo" if "fifo" in names and len(names) > 1 else None
    if a.as_json:
        typer.echo(json.dumps(_payload(a, jobs, skipped, runs, fabric, mixed, baseline), indent=2))
        return
    _tables(a, out, jobs, runs, fabric, mixed, baseline, total_gpus)
    _warnings(a, err, jobs, runs)


def _jobs(a: SimpleNamespace, err: Console) -> tuple[list[TraceJob], int]:
    """The trace's jobs (``--limit``: streamed, read no further) and how many rows were skipped."""
    loaded = read_trace(a.trace, a.fmt, strict=a.strict, limit=a.limit)
    for problem in loaded.problems[:10]:
        # a malformed row is quoted in the line: shown, never read as markup (safe_output)
        err.print(Text.assemble(("skipped", "yellow"), " ", term_safe(problem.render())),
                  highlight=False, soft_wrap=True)
    if len(loaded.problems) > 10:
        err.print(f"[yellow]skipped[/] {len(loaded.problems) - 10} more malformed rows")
    for note in loaded.notes:
        err.print(f"[dim]note:[/] {note}", highlight=False)
    jobs = list(loaded.jobs[:a.limit] if a.limit else loaded.jobs)
    if a.elastic:
        jobs = make_elastic(jobs)
    if not jobs:
        raise InputError("no valid jobs in the trace", path=str(a.trace))
    return jobs, len(loaded.problems)


def _cluster(a: SimpleNamespace) -> tuple[MixedCluster | None, Any]:
    """The typed and priced cluster of ``--gpu-pools``, or the shape/topology one."""
    gpus = deprecated_alias(a.gpus, a.old_gpus, "--gpus", "--gpu-pools")
    a.gpus = gpus
    if gpus is None:
        return None, build_fabric(a.topology, a.nodes, a.gpus_per_node, a.leaf)
    if a.topology is not None:
        raise ConfigError("--gpu-pools builds the cluster: leave out --topology")
    mixed = mixed_cluster(parse_pools(gpus, a.gpus_per_node), a.gpus_per_node, a.leaf,
                          prices=parse_prices(a.prices), spot_per_node_day=a.spot_rate,
                          spot_notice_s=a.spot_notice_s)
    return mixed, mixed.fabric


def _engine_config(a: SimpleNamespace, jobs: list[TraceJob], fabric: Any,
                   mixed: MixedCluster | None) -> EngineConfig:
    if a.measure_only and a.quotas is None:
        raise ConfigError("--quotas-measure-only needs --quotas FILE (the tree to measure against)")
    tree = load_quotas(a.quotas) if a.quotas is not None else None
    try:
        fail, interval = failure_config(a.failures, checkpoint=a.checkpoint_s,
                                        detect_s=a.failure_detect_s, seed=a.seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    config = EngineConfig(sim=SimConfig(comm_share=a.comm_share, panic_checkpoint=a.panic_checkpoint,
                                        checkpoint_interval_s=interval or 1800.0,
                                        checkpoint_cost_s=a.checkpoint_cost_s,
                                        restore_cost_s=a.restart_s,
                                        quotas=tree, enforce_quotas=not a.measure_only,
                                        node_tier=mixed.node_tier if mixed else {},
                                        tiers=mixed.tiers if mixed else {},
                                        spot_down_s=a.spot_down_s, spot_seed=a.seed,
                                        fair_share_half_life_s=a.fair_share_half_life_s),
                          cycle_s=a.cycle_s, tick_s=a.tick_s, seed=a.seed, max_pending=a.max_pending,
                          failures=fail, cycle=_cycle(a) if a.setup is None else a.setup.config)
    if fail is not None and a.settings_file is not None:  # the file's [failures] rules
        from railgang.daemon.config import load_settings

        config = dataclasses.replace(config, steps=functools.partial(
            daemon_steps, load_settings(a.settings_file)))
    if a.degrade:
        try:
            events = parse_degrade(a.degrade, fabric.switches, min(j.submit_time for j in jobs))
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        moving = (MigrationRules(enabled=not a.no_migrate, checkpoint_on_signal=a.panic_checkpoint)
                  if a.setup is None else a.setup.config.migration)  # --config: the file's
        return dataclasses.replace(config, sim=dataclasses.replace(config.sim, degrade=events),
                                   cycle=dataclasses.replace(config.cycle or CycleConfig(),
                                                             migration=moving))
    if a.no_migrate:
        raise ConfigError("--no-migrate needs --degrade (nothing degrades, nothing migrates)")
    return config


def _cycle(a: SimpleNamespace) -> CycleConfig | None:
    """The core's knobs the command sets (None: the core's defaults, as the pinned replays)."""
    if a.leaf_wait_s <= 0:
        return None
    return CycleConfig(leaf_wait_s=a.leaf_wait_s, leaf_holds=a.leaf_holds,
                       leaf_wait_max_s=a.leaf_wait_max_s, whole_leaf_first=a.whole_leaf_first,
                       backfill_held_leaf=a.backfill_held_leaf)


def _serving(a: SimpleNamespace, jobs: list[TraceJob], names: list[str],
             mixed: MixedCluster | None, config: EngineConfig, rules: SpotRules) -> None:
    from railgang.daemon.serving import sim_cli as serving_sim

    if a.topology is not None or mixed is not None or len(names) > 1 or a.ledger is not None:
        raise ConfigError("--serving replays one --policy on a shape cluster (--nodes): "
                          "leave out --topology, --gpu-pools, --compare and --ledger")
    knobs = serving_sim.knobs_from(a.serving_history_days, a.serving_buffer_gpus,
                                   a.serving_quantile, getattr(a, "serving_settings", None),
                                   lend_rigid=a.serving_lend_rigid)
    serving_sim.run(a.serving, jobs, policy_for(names[0], a.type_blind, rules, a.fair_share, a.setup), nodes=a.nodes,
                    gpus_per_node=a.gpus_per_node, leaf=a.leaf, modes=a.serving_modes, knobs=knobs,
                    config=config, as_json=a.as_json,
                    meta={"trace": str(a.trace), "policy": names[0], "seed": a.seed})


def _replays(a: SimpleNamespace, jobs: list[TraceJob], names: list[str], fabric: Any,
             config: EngineConfig, rules: SpotRules, err: Console) -> list[RunResult]:
    runs: list[RunResult] = []
    with Progress(TextColumn("{task.description:>10}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=a.quiet) as bar:
        for name in names:
            task = bar.add_task(name, total=len(jobs))

            def advance(done: int, _total: int, task: TaskID = task) -> None:
                bar.update(task, completed=done)

            runs.append(simulate(jobs, policy_for(name, a.type_blind, rules, a.fair_share, a.setup), fabric, config=config,
                                 comm=TopologyComm(fabric), on_progress=advance))
            bar.update(task, completed=len(jobs))
    return runs


def _ledger(a: SimpleNamespace, jobs: list[TraceJob], policy: Policy, names: list[str], fabric: Any,
            config: EngineConfig, err: Console) -> None:
    if len(names) > 1:
        raise ConfigError("--ledger stores one replay: give --policy, not --compare")
    from railgang.daemon.sim.ledger_cli import write_sim_ledger
    from railgang.daemon.when import relative_day

    start = relative_day(a.ledger_start, datetime.now(UTC), field="--ledger-start")
    # the policy the replay ran (its fair share, spot rules, --config parameters), not a bare one
    stats = write_sim_ledger(err, a.ledger, jobs, policy, fabric, config,
                             start=start, interval_s=a.telemetry_interval_s, seed=a.seed,
                             yes=a.yes, quiet=a.quiet)
    if stats is not None:
        err.print(f"[dim]ledger: {stats.jobs:,} jobs, {stats.segments:,} segments, "
                  f"{stats.samples:,} GPU samples, {stats.step_timings:,} step timings[/]",
                  highlight=False)


def _payload(a: SimpleNamespace, jobs: list[TraceJob], skipped: int, runs: list[RunResult],
             fabric: Any, mixed: MixedCluster | None, baseline: str | None) -> dict[str, Any]:
    total_gpus = sum(fabric.facts(n).gpus for n in fabric.nodes)
    shape = (f"--gpu-pools {a.gpus}, {a.gpus_per_node} per node, {a.leaf} per leaf" if mixed is not None
             else str(a.topology) if a.topology else f"{a.nodes}x{a.gpus_per_node}, {a.leaf} per leaf")
    meta = {"trace": str(a.trace), "jobs": len(jobs), "skipped_rows": skipped,
            "cluster": {"nodes": len(fabric.nodes), "gpus": total_gpus, "topology": shape},
            "elastic": a.elastic, "seed": a.seed}
    if mixed is not None:
        meta["type_blind"] = a.type_blind
    payload = to_json(runs, meta, baseline)
    if a.degrade:
        payload["degrade"], payload["migrate"] = a.degrade, not a.no_migrate
        for run in runs:
            payload["results"][run.policy]["migrations"] = run.migrations
    for run in runs:
        if run.failures is not None:
            payload["results"][run.policy]["failures"] = failure_summary(run.failures, run.records)
        if mixed is not None:
            payload["results"][run.policy].update(
                pool_report(run.records, Capacity(fabric, mixed.node_tier, mixed.tiers),
                            run.metrics.makespan_s))
    for run in runs:
        if run.quota_use is not None:
            payload["quotas_file"] = str(a.quotas)
            payload["quotas_enforced"] = not a.measure_only
            payload["results"][run.policy]["quotas"] = quota_report(run.records, run.quota_use)
    return payload


def _tables(a: SimpleNamespace, out: Console, jobs: list[TraceJob], runs: list[RunResult],
            fabric: Any, mixed: MixedCluster | None, baseline: str | None, total_gpus: int) -> None:
    title = (f"{len(jobs):,} jobs on {total_gpus} GPUs ({len(fabric.nodes)} nodes)"
             + (", elastic" if a.elastic else ""))
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


def _warnings(a: SimpleNamespace, err: Console, jobs: list[TraceJob], runs: list[RunResult]) -> None:
    for run in runs:
        if run.unfinished_reasons:
            sample = "; ".join(list(run.unfinished_reasons.values())[:3])
            err.print(f"[yellow]{run.policy}:[/] {len(run.unfinished_reasons)} jobs unfinished "
                      f"({sample})", highlight=False, soft_wrap=True)
        if run.metrics.rejected:
            err.print(f"[yellow]{run.policy}:[/] {run.metrics.rejected} jobs rejected (larger than "
                      "the cluster)", highlight=False)
        if run.failed_actions:
            failed = ", ".join(f"{k} x{v}" for k, v in run.failed_actions.most_common(5))
            err.print(f"[yellow]{run.policy}:[/] actions refused by the cluster: {failed}",
                      highlight=False, soft_wrap=True)
        if a.degrade:
            err.print(f"[dim]{run.policy}: {run.migrations} job(s) migrated off degraded links[/]",
                      highlight=False)
        if run.failures is not None:
            fs = failure_summary(run.failures, run.records)
            err.print(f"[dim]{run.policy}: {fs['failures']} failures ({fs['leaf_failures']} of a "
                      f"leaf) killed {fs['jobs_killed']} job run(s); {fs['node_hours_out']:,.1f} "
                      f"node-hours out, {fs['interrupted_jobs_gpu_hours_lost']:,.1f} GPU-hours "
                      "lost[/]", highlight=False)
        err.print(f"[dim]{run.policy}: {run.cycles:,} cycles, {run.events:,} events, "
                  f"{run.wall_s:.1f} s, {len(jobs) / max(run.wall_s, 1e-9):,.0f} jobs/s[/]",
                  highlight=False)


__all__ = ["build_fabric", "make_elastic", "policy_for", "policy_names", "pool_table", "replay"]
