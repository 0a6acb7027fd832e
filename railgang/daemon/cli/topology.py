"""``railgang topology check|show|links|generate`` and ``railgang place``: the thin shell over the pure package.

Results go to stdout (text or ``--json``), problems and warnings to stderr. A malformed input
becomes ``railgang.errors.InputError`` (one line, exit 1, via ``railgang.daemon.cli.main``); ``check`` lists
every problem itself and exits 1. ``place`` exits 0 when the gang was placed and 3 when it cannot be
placed now (the reason is printed, it is not an error). Exit codes: ``railgang.errors.ExitCode``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from railgang.daemon.cli.common import JsonOpt, emit, exit_with
from railgang.errors import ExitCode, InputError
from railgang.topology import hostnames
from railgang.topology.conf import (
    MAX_RANGE,
    NO_NODES,
    Problem,
    TopologyConf,
    TopologyError,
    check_topology,
    parse_topology,
)
from railgang.topology.files import parse_json

if TYPE_CHECKING:  # the rest is imported where it is used: `topology --help` and `place --help`
    # import neither networkx nor the placement engine (tests/daemon/test_cli_imports.py)
    from railgang.topology.counters import PortSample
    from railgang.topology.discover import FabricFacts
    from railgang.topology.fabric import Fabric
    from railgang.topology.inputs import InputProblem
    from railgang.topology.placement import Placement

__all__ = ["app", "place"]

app = typer.Typer(help="Check and show Slurm topology.conf files.", no_args_is_help=True)


def _read(path: Path, what: str) -> str:
    """Bounded (``inputs.read_text``): /dev/zero or a 50 MB paste is one line, not a full memory."""
    from railgang.topology.inputs import InputProblem, read_text

    try:
        return read_text(path, what)
    except InputProblem as exc:
        raise _input_error(exc) from exc


def _conf(path: Path) -> TopologyConf:
    try:
        conf = parse_topology(_read(path, "topology file"), str(path))
    except TopologyError as exc:
        raise _topology_error(exc) from exc
    if not conf.nodes:
        raise InputError(NO_NODES, path=str(path))
    return conf


def _topology_error(exc: TopologyError) -> InputError:
    first = exc.problems[0]
    more = f" (and {len(exc.problems) - 1} more; run 'railgang topology check')" if len(exc.problems) > 1 else ""
    return InputError(first.message + more, path=first.path, line=first.line, field=first.field)


def _input_error(exc: InputProblem) -> InputError:
    return InputError(exc.message, path=exc.path, line=exc.line, field=exc.field)


def _fabric(path: Path, facts_path: Path | None, blocks_nvlink: bool) -> Fabric:
    """The fabric as the daemon builds it (``fabric.fabric_from_text``), with the facts file's."""
    from railgang.topology.fabric import NodeFacts, fabric_from_text
    from railgang.topology.inputs import InputProblem, facts_from_slurm_json, parse_facts

    text = _read(path, "topology file")

    def facts(names: Sequence[str]) -> Mapping[str, NodeFacts]:
        # read after the topology parsed, so a broken topology.conf is the error reported first
        if facts_path is None:
            return {}
        facts_text = _read(facts_path, "facts file")
        if facts_path.suffix == ".toml" or not _looks_like_slurm(facts_text):
            return parse_facts(facts_text, str(facts_path)).for_nodes(names)
        return facts_from_slurm_json(facts_text, str(facts_path))

    try:
        return fabric_from_text(text, str(path), facts, blocks_are_nvlink=blocks_nvlink)
    except TopologyError as exc:
        raise _topology_error(exc) from exc
    except InputProblem as exc:
        raise _input_error(exc) from exc


def _looks_like_slurm(text: str) -> bool:
    head = text[:4000]
    return '"sinfo"' in head or '"nodes": [' in head or '"nodes":[' in head


FactsOpt = Annotated[Path | None, typer.Option(
    "--facts", help="Node facts: TOML/JSON description, or `scontrol show nodes --json` / `sinfo --json`.")]
BlocksOpt = Annotated[bool, typer.Option(
    "--blocks-nvlink", help="topology/block: each block is a multi-node NVLink domain.")]


@app.command("check")
def check(ctx: typer.Context, file: Annotated[Path, typer.Argument(help="topology.conf to validate.")],
          as_json: JsonOpt = False,
          slurm_conf: Annotated[list[Path] | None, typer.Option("--slurm-conf", help=(
              "The cluster's slurm.conf (repeat for files it includes): switches and blocks naming "
              "other nodes are errors, as slurmctld refuses them."))] = None,
          nodes: Annotated[str | None, typer.Option("--nodes", help=(
              "The cluster's nodes: a host list, or @FILE of `scontrol show nodes -o`/`--json`."))] = None,
          from_slurm: Annotated[bool, typer.Option("--from-slurm", help=(
              "Read the node list with `scontrol show nodes -o` (slurm.conf of the settings)."))] = False,
          ) -> None:
    """Validate a topology.conf: exit 0 if valid, 1 with its problems on stderr (the first 20)."""
    from railgang.daemon.cli.topology_nodes import known_nodes
    from railgang.topology.cluster_nodes import unknown_nodes
    from railgang.topology.inputs import InputProblem, cap_list, read_text

    known, said = known_nodes(ctx, slurm_conf, nodes, from_slurm)
    for line in said:
        typer.echo(f"warning: {line}", err=True)
    try:
        text = read_text(file, "topology file")
    except InputProblem as exc:
        typer.echo(str(exc), err=True)
        exit_with(ExitCode.ERROR)
    found = check_topology(text, str(file), warnings=True)
    if known is not None and not any(p.severity == "error" for p in found):
        found = (*found, *unknown_nodes(parse_topology(text, str(file)), known))
    problems = tuple(p for p in found if p.severity == "error")
    # what slurmctld accepts but only logs (docs/topology.md "Conformance"): shown, not fatal
    warnings = [{"line": p.line, "field": p.field, "switch": p.switch, "message": p.message}
                for p in found if p.severity != "error"]
    for line in cap_list((f"warning: {p}" for p in found if p.severity != "error"), 20):
        typer.echo(line, err=True)
    if not problems and not parse_topology(text, str(file)).nodes:
        problems = (Problem(str(file), None, None, NO_NODES),)
    if problems:
        if as_json:  # capped like the text: a 50 MB file of repeats must not become 50 MB of JSON
            emit({"path": str(file), "ok": False, "problems_count": len(problems),
                  "problems": [{"path": p.path, "line": p.line, "field": p.field, "switch": p.switch,
                                "message": p.message} for p in problems[:100]], "warnings": warnings[:100]}, True, "")
        for line in cap_list((str(p) for p in problems), 20):
            typer.echo(line, err=True)
        typer.echo(f"{file}: {len(problems)} problem(s)", err=True)
        exit_with(ExitCode.ERROR)
    conf = parse_topology(text, str(file))
    count = len(conf.switches) if conf.kind == "tree" else len(conf.blocks)
    noun = "switches" if conf.kind == "tree" else "blocks"
    emit({"path": str(file), "ok": True, "kind": conf.kind, noun: count, "nodes": len(conf.nodes),
          "problems": [], "warnings": warnings[:100]}, as_json,
         f"{file}: ok (topology/{conf.kind}, {count} {noun}, {len(conf.nodes)} nodes)")


def _compact(names: Iterable[str]) -> str:
    """``gpu[001-004]``; names python-hostlist cannot compress (slurmctld accepts ``n]``) as a list."""
    listed = list(names)
    try:
        return str(hostnames.collect(listed))
    except hostnames.HostListError:
        return ",".join(listed)


def _show_json(fabric: Fabric, conf: TopologyConf) -> dict[str, Any]:
    switches = []
    for sw in fabric.switches:
        under = fabric.nodes_under(sw)
        switches.append({
            "name": sw, "level": fabric.height(sw), "parent": fabric.parent(sw),
            "children": list(fabric.children(sw)),
            "nodes": _compact(fabric.direct_nodes(sw)) if fabric.direct_nodes(sw) else "",
            "node_count": len(under), "gpus": sum(fabric.facts(n).gpus for n in under),
        })
    return {"path": conf.path, "kind": conf.kind, "roots": list(fabric.roots), "depth": fabric.depth,
            "nodes": len(fabric.nodes), "gpus": fabric.total_gpus, "switches": switches,
            "block_sizes": list(conf.block_sizes)}


@app.command("show")
def show(
    file: Annotated[Path, typer.Argument(help="topology.conf to show.")],
    as_json: JsonOpt = False,
    facts: FactsOpt = None,
    blocks_nvlink: BlocksOpt = False,
) -> None:
    """Print the switch tree with levels, node and GPU counts."""
    conf = _conf(file)
    fabric = _fabric(file, facts, blocks_nvlink)
    if as_json:
        typer.echo(json.dumps(_show_json(fabric, conf), indent=2))
        return
    typer.echo(f"{file}: topology/{conf.kind}, {len(fabric.nodes)} nodes, {fabric.total_gpus} GPUs, "
               f"{fabric.depth} levels")

    def walk(sw: str, indent: int) -> None:
        under = fabric.nodes_under(sw)
        direct = fabric.direct_nodes(sw)
        hosts = f": {_compact(direct)}" if direct else ""
        typer.echo(f"{'  ' * indent}{sw}  (level {fabric.height(sw)}, {len(under)} nodes, "
                   f"{sum(fabric.facts(n).gpus for n in under)} GPUs){hosts}")
        for kid in fabric.children(sw):
            walk(kid, indent + 1)

    for root in fabric.roots:
        walk(root, 1)


def _snapshot(root: Path, t: float) -> tuple[list[PortSample], list[str]]:
    """Counter samples of every host under ``root``: ``<host>/`` sysfs trees (``class/infiniband``
    inside, or the devices directly), ``<host>.prom`` node_exporter text, ``<host>.perfquery``."""
    from railgang.topology.counters import (
        parse_node_exporter,
        parse_perfquery,
        read_sysfs,
    )

    if not root.is_dir():
        raise InputError("counter snapshot must be a directory", path=str(root))
    samples: list[PortSample] = []
    warnings: list[str] = []
    for entry in sorted(root.iterdir()):
        if entry.is_dir():
            tree = entry / "class" / "infiniband"
            found = read_sysfs(tree if tree.is_dir() else entry, entry.name, t)
        elif entry.suffix in (".prom", ".perfquery"):
            text = _read(entry, "counter file")
            reader = parse_node_exporter if entry.suffix == ".prom" else parse_perfquery
            found = reader(text, entry.stem, t)
        else:
            warnings.append(f"{entry}: not a host directory, .prom or .perfquery file, skipped")
            continue
        for sample in found:
            warnings.extend(sample.warnings)
        samples.extend(found)
    return samples, warnings


def _live_links(ctx: typer.Context, state: Path | None, show_all: bool, as_json: bool) -> None:
    """The daemon collector's last round (``daemon.links.state_file``), with hysteresis applied."""
    from railgang.daemon.cli.common import settings_from
    from railgang.topology.inputs import InputProblem

    path = state if state is not None else settings_from(ctx).daemon.links.state_file
    if not path.exists():
        raise InputError("no link state yet (is the daemon running with daemon.links.enabled = "
                         "true?)", path=str(path))
    try:  # bounded: --state /dev/zero or a FIFO is one line
        data = parse_json(_read(path, "link state file"), str(path), "link state file")
    except InputProblem as exc:
        raise _input_error(exc) from exc
    if not isinstance(data, dict) or not isinstance(data.get("ports"), list):
        raise InputError("not a link state file (no 'ports' list)", path=str(path))
    ports = [p for p in data["ports"] if show_all or p.get("status") != "healthy" or p.get("quarantined")]
    if as_json:
        typer.echo(json.dumps({**data, "ports": ports}, indent=2))
        return
    c = data.get("counts", {})
    typer.echo(f"{len(data['ports'])} ports on {data.get('hosts', '?')} hosts: {c.get('healthy', 0)} healthy, "
               f"{c.get('congested', 0)} congested, {c.get('lame', 0)} lame, {c.get('unknown', 0)} unknown; "
               f"{data.get('quarantined_ports', 0)} in quarantine (round of {data.get('seconds', 0):.2f} s)")
    for p in ports:
        held = (" QUARANTINED" if p["quarantined"] else "") + (
            f" (lame {p['lame_in_window']} of last intervals, clean streak {p['clean_streak']})")
        typer.echo(f"  {p['host']} {p['device']} port {p['port']}: {p['status']}, "
                   f"{p['effective_gbps']:.1f} GB/s{held}" + (f" ({'; '.join(p['reasons'])})" if p["reasons"] else ""))
    quarantine = data.get("quarantine", [])
    typer.echo(f"quarantine ({len(quarantine)} node(s)):" if quarantine else "quarantine: none")
    for e in quarantine:
        typer.echo(f"  {e['node']}: {e['reason']}")
    for e in data.get("errors", [])[:10]:
        typer.echo(f"warning: {e}", err=True)


@app.command("links")
def links(
    ctx: typer.Context,
    before: Annotated[Path | None, typer.Argument(
        help="Counter snapshot directory, taken first (omit both: the daemon's live state).")] = None,
    after: Annotated[Path | None, typer.Argument(
        help="Counter snapshot directory, taken --interval later.")] = None,
    topology: Annotated[Path | None, typer.Option(
        "--topology", "-t", help="Slurm topology.conf (with two snapshots).")] = None,
    state: Annotated[Path | None, typer.Option(
        "--state", help="Live mode: the daemon's link state file (default daemon.links.state_file).")] = None,
    interval: Annotated[float, typer.Option("--interval", help="Seconds between the snapshots.")] = 10.0,
    nominal: Annotated[float, typer.Option("--nominal-gbps", help="Expected GB/s per port.")] = 50.0,
    lame_rate: Annotated[float, typer.Option("--lame-errors-per-s", help="Error rate that makes a link lame.")] = 0.01,
    show_all: Annotated[bool, typer.Option("--all", help="List healthy ports too.")] = False,
    as_json: JsonOpt = False,
    facts: FactsOpt = None,
) -> None:
    """Classify InfiniBand links from two counter snapshots, or show the daemon's live link
    health (no snapshots), and list the nodes to quarantine."""
    from railgang.topology.counters import port_rates
    from railgang.topology.linkstate import Thresholds, assess, quarantine_entries

    if before is None and after is None:
        _live_links(ctx, state, show_all, as_json)
        return
    if before is None or after is None or topology is None:
        raise InputError("give two counter snapshot directories and --topology, or none of them "
                         "for the daemon's live link state", field="--topology")
    if interval <= 0:
        raise InputError(f"--interval must be positive, got {interval}", field="--interval")
    fabric = _fabric(topology, facts, False)
    old, warn_a = _snapshot(before, 0.0)
    new, warn_b = _snapshot(after, interval)
    previous = {s.key: s for s in old}
    rates = [r for s in new if (p := previous.get(s.key)) is not None and (r := port_rates(p, s)) is not None]
    missing = len(new) - len(rates)
    result = assess(fabric, rates, Thresholds(nominal_gbps=nominal, lame_errors_per_s=lame_rate))
    for w in (*warn_a, *warn_b, *result.warnings,
              *([f"{missing} port(s) only in the second snapshot, skipped"] if missing else [])):
        typer.echo(f"warning: {w}", err=True)
    entries = quarantine_entries(result.health)
    if as_json:
        typer.echo(json.dumps({
            "ports": [{"host": st.key.host, "device": st.key.device, "port": st.key.port, "status": st.status,
                       "effective_gbps": st.effective_gbps, "reasons": list(st.reasons)}
                      for st in result.states if show_all or st.status != "healthy"],
            "quarantine": [{"node": e.node, "reason": e.reason} for e in entries],
        }, indent=2))
        return
    counts = {k: sum(1 for st in result.states if st.status == k) for k in ("healthy", "congested", "lame")}
    typer.echo(f"{len(result.states)} ports: {counts['healthy']} healthy, {counts['congested']} congested, "
               f"{counts['lame']} lame")
    for st in result.states:
        if show_all or st.status != "healthy":
            typer.echo(f"  {st.key.host} {st.key.device} port {st.key.port}: {st.status}, "
                       f"{st.effective_gbps:.1f} GB/s" + (f" ({'; '.join(st.reasons)})" if st.reasons else ""))
    typer.echo(f"quarantine ({len(entries)} node(s)):" if entries else "quarantine: none")
    for e in entries:
        typer.echo(f"  {e.node}: {e.reason}")


@app.command("generate")
def generate(
    nodes: Annotated[int, typer.Option("--nodes", help="Number of nodes.")] = 64,
    nodes_per_leaf: Annotated[int, typer.Option("--nodes-per-leaf", help="Nodes under each leaf.")] = 8,
    leaves_per_spine: Annotated[int | None, typer.Option(
        "--leaves-per-spine", help="Leaves per spine (three levels); default: two levels.")] = None,
    prefix: Annotated[str, typer.Option("--prefix", help="Node name prefix.")] = "n",
) -> None:
    """Print a regular fat-tree topology.conf (for demos, tests and the simulator)."""
    from railgang.topology.fabric import fabric_from_shape, render_topology

    if nodes < 1 or nodes_per_leaf < 1 or (leaves_per_spine is not None and leaves_per_spine < 1):
        raise InputError("--nodes, --nodes-per-leaf and --leaves-per-spine must be positive", field="--nodes")
    if nodes > MAX_RANGE:  # the same bound as a host list in topology.conf; more would run for minutes
        raise InputError(f"--nodes {nodes} is more than {MAX_RANGE:,} nodes", field="--nodes")
    if not prefix or len(prefix) > 64 or not prefix.replace("-", "").replace("_", "").isalnum():
        raise InputError(f"--prefix must be 1-64 letters, digits, '-' or '_', got {prefix[:70]!r}",
                         field="--prefix")
    typer.echo(render_topology(fabric_from_shape(nodes, 8, nodes_per_leaf, leaves_per_spine, prefix=prefix)),
               nl=False)


# ibnetdiscover of a 10,000-GPU fabric is ~4 MB and of the largest fabrics tens of MB; it is
# streamed, so the cap only stops endless input (in seconds, not minutes).
_IBNET_MAX_BYTES = 256 * 2**20


def _rates(table: dict[float, int]) -> str:
    return ", ".join(f"{k:g} Gb/s x{v}" for k, v in sorted(table.items(), reverse=True)) or "none"


def _discover_summary(found: FabricFacts, tops: int) -> str:
    hcas = sum(len(h) for h in found.hosts.values())
    rails = f"{found.rails} rails, rail-optimised" if found.rail_optimised else f"{found.rails} rail"
    return (f"discovered {len(found.hosts)} nodes ({hcas} HCAs, {rails}), {len(found.switches)} switches in "
            f"{found.levels} level(s), {tops} Slurm switch line(s); links: hosts {_rates(dict(found.link_rates['host']))}"
            f"; switches {_rates(dict(found.link_rates['switch']))}")


@app.command("discover")
def discover(
    source: Annotated[Path, typer.Argument(help="ibnetdiscover output (plain, --node-name-map or -p form); - reads stdin.")],
    node_name_map: Annotated[Path | None, typer.Option(
        "--node-name-map", help="GUID -> name map (OpenSM format) for devices with vendor descriptions.")] = None,
    rail_map: Annotated[Path | None, typer.Option(
        "--rail-map", help="Node facts: host list -> HCA -> rail (JSON, TOML or YAML).")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write topology.conf here (default: stdout).")] = None,
    facts_out: Annotated[Path | None, typer.Option("--facts-out", help="Write the fabric facts (JSON) here.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when anything could not be classified.")] = False,
    nvidia_smi: Annotated[Path | None, typer.Option(
        "--nvidia-smi", help="`pdsh -w NODES nvidia-smi -q` output: write topology/block lines, one block per "
                             "NVLink domain (ClusterUUID + CliqueId), in InfiniBand tree order.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Build topology.conf and fabric facts (rails, HCAs, switch levels, link rates) from ibnetdiscover output."""
    from railgang.topology.discover import (
        classify,
        facts_json,
        parse_ibnetdiscover,
        parse_node_name_map,
        parse_rail_map,
        render_conf,
        slurm_tree,
    )
    from railgang.topology.inputs import InputProblem, cap_list, iter_lines, write_atomic

    try:
        found = parse_ibnetdiscover(iter_lines(source, "ibnetdiscover output", max_bytes=_IBNET_MAX_BYTES),
                                    str(source))
        names = parse_node_name_map(_read(node_name_map, "node name map"), str(node_name_map)) if node_name_map else None
        rails = parse_rail_map(_read(rail_map, "rail map"), str(rail_map)) if rail_map else None
    except InputProblem as exc:
        raise _input_error(exc) from exc
    facts = classify(found, names, rails)
    if not facts.hosts:
        cas = sum(1 for d in found.devices.values() if d.kind == "ca")
        raise InputError(f"no nodes: none of the {cas} CA(s) names a host (NodeDescription like 'gpu001 mlx5_0'); "
                         "give --node-name-map", path=str(source))
    tree = slurm_tree(facts)
    conf = render_conf(facts, tree)
    problems = list(facts.problems)
    made_up = [g for g in tree if not g.members]
    notes = [f"{len(g.switches)} top switch groups have no common switch above them; joined under a "
             f"made-up {g.name!r}" for g in made_up]
    if nvidia_smi is not None:
        conf = _block_conf(nvidia_smi, facts, tree, problems, notes)
    parse_topology(conf, "<discovered>")  # a TopologyError here is a bug in the emitter, not bad input
    data = facts_json(facts, tree)
    for path, text in ((output, conf), (facts_out, json.dumps(data, indent=2) + "\n")):
        if path is not None:
            try:
                write_atomic(path, text)  # a reader (slurmctld, a second discover) never sees half a file
            except OSError as exc:
                raise InputError(f"cannot write: {exc.strerror or exc}", path=str(path)) from exc
    if as_json:
        summary = {k: v for k, v in data.items() if k not in ("nodes", "switches")}
        summary["notes"] = notes
        if output is None:
            summary["topology_conf"] = conf
        typer.echo(json.dumps(summary, indent=2))
    else:
        if output is None:
            typer.echo(conf, nl=False)
        typer.echo(_discover_summary(facts, len(tree)), err=output is None)
        for p in problems:
            shown = cap_list(p.items, 5)
            if p.count > len(p.items):
                shown[-1:] = [shown[-1], f"… and {p.count - len(p.items)} more"] if len(p.items) <= 5 else [
                    f"… and {p.count - 5} more"]
            typer.echo(f"warning: {p.count} {p.kind}: {'; '.join(shown)}", err=True)
        for note in notes:
            typer.echo(f"warning: {note}", err=True)
    if strict and (problems or notes):
        exit_with(ExitCode.ERROR)


def _block_conf(source: Path, facts: FabricFacts, tree: Any, problems: list[Any], notes: list[str]) -> str:
    """topology/block text from NVLink domains joined with the discovered IB tree (docs/topology.md)."""
    from railgang.topology.discover.nvlink import parse_nvidia_smi, render_block_conf, tree_rank
    from railgang.topology.inputs import InputProblem, iter_lines

    try:
        found = parse_nvidia_smi(iter_lines(source, "nvidia-smi output", max_bytes=_IBNET_MAX_BYTES), str(source))
    except InputProblem as exc:
        raise _input_error(exc) from exc
    problems.extend(found.problems)
    if not found.domains:
        raise InputError("no NVLink domain: no node reports a ClusterUUID and CliqueId (expected `pdsh -w NODES "
                         "nvidia-smi -q` output, lines 'host: ...')", path=str(source))
    conf, more = render_block_conf(found, facts.hosts, tree_rank(tree), str(source))
    notes.extend(more)
    return conf


def _placement_json(fabric: Fabric, p: Placement, seconds: float, step: dict[str, float]) -> dict[str, Any]:
    return {
        "placed": True, "job_class": p.job_class, "scope": p.scope, "cost": p.cost,
        "breakdown": dict(p.breakdown), "candidates": p.candidates,
        "gpus": {n: list(g) for n, g in p.gpus.items()},
        "leaves": sorted({fabric.leaf_of(n) for n in p.gpus}),
        "allreduce_1gb_ms": seconds * 1e3,
        "step_comm_ms": {k: v * 1e3 for k, v in step.items()},
        "ranks": [{"rank": i, "node": r.node, "gpu": r.gpu, "tp": r.tp_rank, "pp": r.pp_stage, "dp": r.dp_rank}
                  for i, r in enumerate(p.ranks)],
    }


def _check_request(fabric: Fabric, gpus: int, tp: int, pp: int, dp: int | None) -> None:
    """Requests that no free state could ever satisfy are invalid input (exit 1), not "not now"
    (3); a TP degree that leaves GPUs of every NVLink domain unusable is warned about with the count."""
    for flag, value in (("--gpus", gpus), ("--tp", tp), ("--pp", pp), ("--dp", dp)):
        if value is not None and value < 1:
            raise InputError(f"must be a positive number, got {value}", field=flag)
    if gpus > fabric.total_gpus:
        raise InputError(f"asks for {gpus} GPUs, more than the whole topology has ({fabric.total_gpus} GPUs "
                         f"on {len(fabric.nodes)} nodes)", field="--gpus")
    if tp > 1:
        sizes = [sum(fabric.facts(n).gpus for n in members) for members in fabric.domains.values()]
        stranded = [size % tp if size >= tp else size for size in sizes]
        if all(stranded) and any(size >= tp for size in sizes):
            typer.echo(f"warning: --tp {tp} strands {sum(stranded)} of {fabric.total_gpus} GPUs: every one of the "
                       f"{len(sizes)} NVLink domains keeps {_span(stranded)} GPU(s) no TP group can "
                       f"use (a TP group stays inside one domain); a divisor of {max(sizes)} wastes none", err=True)


def _span(values: list[int]) -> str:
    return f"{min(values)}" if min(values) == max(values) else f"{min(values)}-{max(values)}"


def place(
    topology: Annotated[Path, typer.Option("--topology", "-t", help="Slurm topology.conf.")],
    gpus: Annotated[int, typer.Option("--gpus", "-n", help="Total GPUs of the gang.")],
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel degree (inside one NVLink domain).")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline-parallel stages.")] = 1,
    dp: Annotated[int | None, typer.Option("--dp", help="Data-parallel replicas (default gpus/(tp*pp)).")] = None,
    job_class: Annotated[Literal["3d", "dp", "single"] | None, typer.Option(
        "--class", help="Gang class (default: inferred from the shape).")] = None,
    free: Annotated[Path | None, typer.Option("--free", help="Free-GPU file (see docs/topology.md).")] = None,
    occupancy: Annotated[float | None, typer.Option("--occupancy", help="Synthetic busy fraction, 0..1.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for --occupancy and the search.")] = 0,
    min_mem: Annotated[float, typer.Option("--min-gpu-mem", help="Minimum GPU memory, GB.")] = 0.0,
    nvlink: Annotated[bool, typer.Option("--nvlink", help="Require NVLink nodes.")] = False,
    facts: FactsOpt = None,
    blocks_nvlink: BlocksOpt = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show the rank layout and cost terms.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Place a gang on a topology: exit 0 placed, 3 cannot be placed now (reason printed)."""
    from railgang.topology.comm_model import allreduce_time_s, step_comm_time_s
    from railgang.topology.fragmentation import fragmentation_index
    from railgang.topology.inputs import InputProblem, parse_free
    from railgang.topology.occupancy import random_occupancy
    from railgang.topology.placement import GangRequest, Unplaceable
    from railgang.topology.placement import place as place_gang

    if free is not None and occupancy is not None:
        raise InputError("give either --free or --occupancy, not both", field="--free")
    if occupancy is not None and not 0.0 <= occupancy <= 1.0:
        raise InputError(f"--occupancy must be within [0, 1], got {occupancy}", field="--occupancy")
    fabric = _fabric(topology, facts, blocks_nvlink)
    _check_request(fabric, gpus, tp, pp, dp)
    if free is not None:
        try:
            free_map, warnings = parse_free(_read(free, "free-GPU file"), str(free), fabric)
        except InputProblem as exc:
            raise _input_error(exc) from exc
        for w in warnings:
            typer.echo(f"warning: {w}", err=True)
    elif occupancy is not None:
        free_map = random_occupancy(fabric, occupancy, seed)
    else:
        free_map = {n: frozenset(range(fabric.facts(n).gpus)) for n in fabric.nodes}
    request = GangRequest(gpus, tp, pp, dp, job_class, min_mem, nvlink)
    result = place_gang(fabric, free_map, request, seed=seed)
    frag = fragmentation_index(fabric, free_map, [request])
    if isinstance(result, Unplaceable) and result.code == "invalid_request":
        raise InputError(result.detail)  # no amount of freed GPUs helps: invalid input, not "not now"
    if isinstance(result, Unplaceable):
        # "not now" (3) must mean "later, once GPUs are freed": what the idle cluster cannot hold is invalid
        all_free = {n: frozenset(range(fabric.facts(n).gpus)) for n in fabric.nodes}
        idle = result if free_map == all_free else place_gang(fabric, all_free, request, seed=seed)
        if isinstance(idle, Unplaceable):
            raise InputError(f"cannot be placed even on the idle cluster: {idle.code}: {idle.detail}")
    if isinstance(result, Unplaceable):
        if as_json:
            typer.echo(json.dumps({"placed": False, "code": result.code, "detail": result.detail,
                                   "fragmentation_index": frag.index}))
        else:
            typer.echo(f"cannot place now: {result.code}: {result.detail}")
        exit_with(ExitCode.NOT_NOW)
    seconds = allreduce_time_s(fabric, result, 1e9)
    step = step_comm_time_s(fabric, result, 1e9, 64e6)
    if as_json:
        out = _placement_json(fabric, result, seconds, step)
        out["fragmentation_index"] = frag.index
        typer.echo(json.dumps(out, indent=2))
        return
    leaves = sorted({fabric.leaf_of(n) for n in result.gpus}, key=fabric.leaves.index)
    typer.echo(f"placed {len(result.ranks)} GPUs ({result.job_class}) on {len(result.gpus)} node(s) "
               f"under {result.scope or leaves[0]}: {_compact(result.gpus)}")
    typer.echo(f"leaves: {', '.join(leaves)}; cost {result.cost:g}; "
               f"modeled 1 GB all-reduce {seconds * 1e3:.1f} ms")
    if not explain:
        return
    typer.echo("cost terms: " + ", ".join(f"{k}={v:g}" for k, v in result.breakdown.items()))
    after = {n: g - frozenset(result.gpus.get(n, ())) for n, g in free_map.items()}
    frag_after = fragmentation_index(fabric, after)
    typer.echo(f"candidates scored: {result.candidates}; fragmentation index (whole-node gangs) "
               f"before {fragmentation_index(fabric, free_map).index:.2f}, after {frag_after.index:.2f}")
    typer.echo("step communication (1 GB grads, 64 MB activations): "
               + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in step.items()))
    typer.echo("rank  node  gpu  tp  pp  dp  leaf")
    for i, r in enumerate(result.ranks):
        typer.echo(f"{i:>4}  {r.node}  {r.gpu:>3}  {r.tp_rank:>2}  {r.pp_stage:>2}  {r.dp_rank:>2}  "
                   f"{fabric.leaf_of(r.node)}")
