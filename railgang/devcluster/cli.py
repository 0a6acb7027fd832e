"""``railgang devcluster up|down|status``: a real local GPU Slurm cluster for trying and testing."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from railgang.daemon.cli.common import JsonOpt, emit, exit_with, settings_from
from railgang.devcluster.cluster import DevCluster, register_accounts, write_configs
from railgang.devcluster.layout import ClusterSpec, parse_pools, site_spec
from railgang.errors import DevClusterError, ExitCode

if TYPE_CHECKING:  # pydantic-settings is imported when settings are read, not by --help
    from railgang.daemon.config import Settings

app = typer.Typer(help="A local GPU Slurm test cluster from Debian's packages on this machine (root, loopback only): 22.05 on Debian 12, 24.11/26.05 in a container (docs/devcluster.md).",
                  no_args_is_help=True)
console = Console()


def spec_from_settings(settings: Settings, directory: Path | None = None,
                       nodes: int | None = None, pools: str | None = None,
                       site: bool = False) -> ClusterSpec:
    dc = settings.devcluster
    if site and (nodes is not None or pools is not None):
        raise DevClusterError("--site has its own six nodes and pools; give neither --nodes nor --pools")
    try:
        parsed = parse_pools(dc.pools if pools is None else pools)
    except ValueError as exc:
        raise DevClusterError(str(exc)) from exc
    if parsed and nodes is not None:
        raise DevClusterError("--nodes and --pools both size the cluster; give one")
    spec = ClusterSpec(
        dir=directory or dc.dir, cluster_name=dc.cluster_name, nodes=nodes or dc.nodes,
        gpus_per_node=dc.gpus_per_node, nodes_per_leaf=dc.nodes_per_leaf,
        slurmctld_port=dc.slurmctld_port, slurmdbd_port=dc.slurmdbd_port,
        mariadb_port=dc.mariadb_port, slurmd_base_port=dc.slurmd_base_port,
        accounting=dc.accounting, daemon_heartbeat=settings.daemon.heartbeat_file,
        grants_file=settings.ledger.grants_file, fleet_file=settings.slurm.fleet_file,
    )
    return site_spec(spec) if site else spec.with_pools(parsed)


DirOpt = Annotated[Path | None, typer.Option("--dir", help="Cluster directory (default: devcluster.dir).")]
PoolsOpt = Annotated[str | None, typer.Option(
    "--pools", help="Mixed GPU pools TYPE[:TIER]=NODES[:FEATURE+...], e.g. a100=4,v100=4,v100:spot=4 "
    "(typed GRES gpu:a100:N, features such as gpumem_80g,nvlink,ib, the tier as tier_spot; "
    "docs/needs.md). Default: devcluster.pools.")]


@app.command("up")
def up(
    ctx: typer.Context,
    directory: DirOpt = None,
    nodes: Annotated[int | None, typer.Option(help="Number of nodes (default: devcluster.nodes).")] = None,
    pools: PoolsOpt = None,
    site: Annotated[bool, typer.Option(
        "--site", help="The site-like cluster: 6 nodes of h100/a100/v100, partitions gpu/short/big, "
        "CPUs and memory that run out first, a QOS, a reservation, a license (docs/devcluster.md).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Start munge, MariaDB + slurmdbd, slurmctld and one slurmd per node; wait until all are idle."""
    spec = spec_from_settings(settings_from(ctx), directory, nodes, pools, site)
    # with --json the progress lines go to stderr, so stdout is one JSON document
    progress = Console(stderr=True) if as_json else console
    cluster = DevCluster(spec, progress=lambda m: progress.print(f"[dim]·[/] {m}", highlight=False))
    res = cluster.up()
    if as_json:
        emit({"already_running": res.already_running, "seconds": res.seconds,
              "processes": res.processes, "nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node,
              "pools": {p.name: {"nodes": p.nodes, "features": list(p.features)} for p in spec.pools},
              "dir": str(spec.dir), "slurm_conf": str(spec.slurm_conf),
              "fleet_file": str(spec.gpu_fleet_file)}, True, "")
        return
    if res.already_running:
        console.print(f"already up: {spec.nodes} nodes under {spec.dir}")
    else:
        pools = " (" + ", ".join(f"{p.nodes} {p.name}" for p in spec.pools) + ")" if spec.pools else ""
        console.print(f"[green]up[/] in {res.seconds:.1f} s: {spec.nodes} nodes{pools} × {spec.gpus_per_node} GPUs, "
                      f"{res.processes} processes")
    console.print(f"export SLURM_CONF={spec.slurm_conf}", highlight=False, soft_wrap=True)


# the service names of docker-compose.yml: each Slurm daemon on its own host, each node a host
CONTAINER_HOSTS = {"slurmctld_host": "slurmctld", "dbd_host": "slurmdbd", "storage_host": "mariadb",
                   "node_addr": None}
STORAGE_PASS_ENV = "SLURM_DB_PASSWORD"


@app.command("render")
def render(
    ctx: typer.Context,
    directory: DirOpt = None,
    nodes: Annotated[int | None, typer.Option(help="Number of nodes (default: devcluster.nodes).")] = None,
    containers: Annotated[bool, typer.Option(
        "--containers", help="One host per daemon and per node (docker-compose.yml): slurmctld, "
        f"slurmdbd, mariadb, n01…; the MariaDB password comes from ${STORAGE_PASS_ENV}.")] = False,
    host_network: Annotated[bool, typer.Option(
        "--host-network", help="Containers on the host's network (deploy/docker-compose.host.yml):"
        f" loopback addresses and ports as without --containers, the MariaDB password from "
        f"${STORAGE_PASS_ENV}.")] = False,
    spank: Annotated[Path | None, typer.Option(help="Built SPANK plugin for plugstack.conf.")] = None,
    pools: PoolsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the cluster's Slurm configs into DIR/etc without starting anything (the images use it)."""
    spec = spec_from_settings(settings_from(ctx), directory, nodes, pools)
    if containers and host_network:
        raise DevClusterError("--containers and --host-network exclude each other")
    if containers or host_network:
        password = os.environ.get(STORAGE_PASS_ENV, "")
        if not password:
            raise DevClusterError(f"--containers/--host-network: set {STORAGE_PASS_ENV} (the "
                                  "MariaDB password of Slurm's accounting user); it is never "
                                  "written into an image")
        hosts = CONTAINER_HOSTS if containers else {}
        spec = replace(spec, storage_pass=password, **hosts)  # type: ignore[arg-type]
    write_configs(spec, spank)
    files = ["slurm.conf", "gres.conf", "topology.conf", "plugstack.conf", "job_submit.lua",
             *(["slurmdbd.conf"] if spec.accounting else [])]
    if as_json:
        emit({"etc": str(spec.etc), "files": files}, True, "")
        return
    console.print(f"wrote {spec.etc}: {' '.join(files)}", highlight=False, soft_wrap=True)


@app.command("accounts")
def accounts(ctx: typer.Context, directory: DirOpt = None, as_json: JsonOpt = False) -> None:
    """Register the cluster and the test accounts (ml-org → research → team-a, team-b) in slurmdbd."""
    spec = spec_from_settings(settings_from(ctx), directory)
    register_accounts(spec)
    emit({"cluster": spec.cluster_name, "registered": True}, as_json,
         f"accounts registered for cluster {spec.cluster_name}")


@app.command("down")
def down(ctx: typer.Context, directory: DirOpt = None, as_json: JsonOpt = False) -> None:
    """Stop exactly the processes `up` started (by recorded PID)."""
    spec = spec_from_settings(settings_from(ctx), directory)
    n = DevCluster(spec).down()
    emit({"stopped": n, "dir": str(spec.dir)}, as_json,
         f"stopped {n} processes" if n else "nothing running")


@app.command("status")
def status(ctx: typer.Context, directory: DirOpt = None, pools: PoolsOpt = None,
           as_json: JsonOpt = False) -> None:
    """Processes, nodes, GPUs and states, and the SLURM_CONF line to use sinfo/sbatch against it.
    Exit 0 when everything runs, 4 when the cluster is down or degraded."""
    spec = spec_from_settings(settings_from(ctx), directory, pools=pools)
    pool_of = spec.pool_of()
    gres = {n: f"gpu:{pool_of[n].gpu_type}:{spec.gpus_per_node}" if n in pool_of
            else f"gpu:{spec.gpus_per_node}" for n in spec.node_names}
    cluster = DevCluster(spec)
    running = cluster.running()
    up_now = all(running.values())
    nodes = cluster.node_states() if running.get("slurmctld") else {}
    if as_json:
        typer.echo(json.dumps({
            "up": up_now, "dir": str(spec.dir), "slurm_conf": str(spec.slurm_conf),
            "processes": running, "nodes": {n: {"state": st, "gpus": spec.gpus_per_node,
                                                "gres": gres.get(n, "")}
                                            for n, st in nodes.items()},
        }, indent=2))
        exit_with(ExitCode.OK if up_now else ExitCode.NOT_RUNNING)
    down_procs = [n for n, ok in running.items() if not ok]
    if up_now:
        console.print(f"[green]up[/]: {len(running)} processes under {spec.dir}")
    elif len(down_procs) == len(running):
        console.print(f"[yellow]down[/]: nothing running under {spec.dir}")
    else:
        console.print(f"[red]degraded[/]: not running: {', '.join(down_procs)}")
    if nodes:
        table = Table("node", "leaf", "GPUs", "state")
        leaf_of = {n: leaf for leaf, members in spec.leaves for n in members}
        for name, state in nodes.items():
            table.add_row(name, leaf_of.get(name, "?"), gres.get(name, "?"), state)
        console.print(table)
        console.print(f"export SLURM_CONF={spec.slurm_conf}", highlight=False, soft_wrap=True)
    exit_with(ExitCode.OK if up_now else ExitCode.NOT_RUNNING)
