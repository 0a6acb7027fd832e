"""``railgang sim``: replay a job trace through the decision core on a simulated cluster.

Every policy runs through the same ``run_cycle`` → ``decide`` → ``SimBackend`` path the daemon
uses with Slurm. Results go to stdout (a table, or ``--json``); the progress bar and warnings about
skipped rows go to stderr. Errors are ``RailgangError``s: one line, exit code 1; a policy or trace
format the registries do not know is a usage error (exit 2) listing the known ones.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from railgang.daemon.cli.common import JSON_HELP, choices_metavar, registry_choice
from railgang.daemon.core.policies import registry
from railgang.daemon.sim import traces

if TYPE_CHECKING:  # the engine, pools and reports are imported by the command itself, so
    # `sim --help` does not pay for the fabric (networkx) (tests/daemon/test_cli_imports.py)
    pass

ALL_POLICIES = "fifo,slurm,tiresias,themis,pollux,default"












# --format, --policy and --compare take the names the registries know (a usage error otherwise)
format_choice = registry_choice(traces.names)
policy_choice = registry_choice(registry.names)
policies_choice = registry_choice(registry.names, comma_list=True)


def sim(
    ctx: typer.Context,
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
        "--cycle-s", min=0, help="Decision cycle quantum (0 = at every change; with --config: "
                                 "the file's daemon.cycle_interval_s).")] = 0.0,
    tick_s: Annotated[float, typer.Option(
        "--tick-s", min=0, help="Extra periodic cycles while jobs wait (0 = off; with --config: "
                                "the file's daemon.cycle_interval_s).")] = 0.0,
    leaf_wait_s: Annotated[float, typer.Option(
        "--leaf-wait-s", min=0, max=86400,
        help="A multi-node gang one leaf could hold waits up to this long for one leaf, holding "
             "it (the daemon's daemon.leaf_wait_s; docs/policies.md; 0 = off).")] = 0.0,
    leaf_holds: Annotated[int, typer.Option(
        "--leaf-holds", min=0, max=1024, help="With --leaf-wait-s: leaves held per cycle.")] = 2,
    leaf_wait_max_s: Annotated[float, typer.Option(
        "--leaf-wait-max-s", min=0, max=86400,
        help="With --leaf-wait-s: past it and up to this, keep waiting only while a leaf is "
             "expected to have room before it (the daemon's default: 600).")] = 0.0,
    whole_leaf_first: Annotated[bool, typer.Option(
        "--whole-leaf-first",
        help="With --leaf-wait-s: a gang that needs a whole leaf holds one ahead of the smaller "
             "jobs before it in the order (the daemon's daemon.whole_leaf_first).")] = False,
    backfill_held_leaf: Annotated[bool, typer.Option(
        "--backfill-held-leaf",
        help="With --leaf-wait-s: a job that would wait starts on a held leaf's GPUs when it ends "
             "before that leaf's holder expects room there (daemon.backfill_held_leaf).")] = False,
    fair_share: Annotated[bool, typer.Option(
        "--fair-share",
        help="default: inside a Tiresias queue, the account that used fewer GPU-hours lately goes "
             "first (daemon.fair_share; docs/policies.md).")] = False,
    fair_share_half_life_s: Annotated[float, typer.Option(
        "--fair-share-half-life-s", min=0,
        help="With --fair-share: the half-life of past use (Slurm's PriorityDecayHalfLife; "
             "default 7 days; 0: no decay).")] = 7 * 86400.0,
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
    failures: Annotated[str | None, typer.Option(
        "--failures", help="Node and leaf failures: llama3[,KEY=VALUE...] (Llama 3's rates: 419 "
                           "interruptions in 54 days on 16,384 GPUs), keys gpu, node, leaf (per "
                           "GPU-, node-, leaf-hour), repair, leaf-repair, scale.")] = None,
    failure_detect_s: Annotated[float, typer.Option(
        "--failure-detect-s", help="With --failures: a failed job hangs this long before it is "
                                   "killed (0 = at once).")] = 0.0,
    checkpoint_s: Annotated[str | None, typer.Option(
        "--checkpoint-s", help="Checkpoint interval (seconds or 30m), or 'advised': Young-Daly "
                               "per job from --failures' rate where shorter (default 1800).")] = None,
    checkpoint_cost_s: Annotated[float, typer.Option(
        "--checkpoint-cost-s", min=0, max=86400, help="Seconds one checkpoint costs.")] = 60.0,
    restart_s: Annotated[float, typer.Option(
        "--restart-s", min=0, max=86400,
        help="Seconds a restarted job reloads and warms up before it makes progress.")] = 120.0,
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
                          "replay it beside the trace, the daemon's serving step lending its pool "
                          "by forecast; "
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
    serving_lend_rigid: Annotated[bool | None, typer.Option(
        "--serving-lend-rigid/--no-serving-lend-rigid",
        help="With --serving: rigid batch jobs borrow any lent node (checkpointed at the "
             "take-back); default: [serving] lend_to_rigid of --config, else false.")] = None,
) -> None:
    """Replay a job trace through the decision core on a simulated cluster."""
    from railgang.daemon.sim.replay import replay

    # every option, by its parameter name: the replay reads them as attributes; ``given``: the
    # options on the command line, which override the settings file (``--config``)
    given = {name for name in ctx.params if _source(ctx, name) not in ("DEFAULT", "DEFAULT_MAP")}
    # the daemon's settings file: `railgang sim --config FILE` is `railgang --config FILE sim`
    # (cli/lazy.py hoists it); taken when on the command line, never from $RAILGANG_CONFIG, so a
    # replay stays what its own command line says (docs/simulator.md "One set of settings")
    root = ctx.find_root()
    settings_file = (root.params.get("config") if root is not ctx
                     and _source(root, "config") == "COMMANDLINE" else None)
    replay(SimpleNamespace(**{**locals(), "given": given}))


def _source(ctx: Any, name: str) -> str | None:
    """Where option ``name``'s value came from, by name: typer may carry its own copy of click,
    whose ``ParameterSource`` is another enum than ``click.core``'s."""
    source = ctx.get_parameter_source(name)
    return None if source is None else source.name
