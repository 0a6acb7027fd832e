"""The cluster's node list, and the switches and blocks of a topology.conf that name other nodes.

slurmctld refuses a topology.conf whose switch or block names a node its slurm.conf does not
define (``fatal: Invalid node name (n[17-18]) in switch config (s1)``, topology_tree.c of 22.05
and 24.11; the block plugin alike). ``railgang topology check`` can only tell that with the node
list beside the file: from slurm.conf (its ``NodeName=`` lines), from ``scontrol show nodes -o``
(or ``scontrol show nodes --json`` / ``sinfo --json`` output), or a host list given outright.

Pure: text in, names or ``Problem`` lines out. Host lists go through the bounded expander of
``slurm_syntax`` (a typo such as ``n[1-99999999]`` is one line, not a full memory); every
message is cut short, so a hostile file's 50 MB line never becomes a 50 MB error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from railgang.topology import hostnames
from railgang.topology.conf import MAX_RANGE, Problem, TopologyConf
from railgang.topology.files import InputProblem
from railgang.topology.slurm_syntax import host_list, logical_lines, next_pair

__all__ = ["nodes_from_hostlist", "nodes_from_scontrol", "nodes_from_slurm_conf", "unknown_nodes"]

_SHOWN = 80  # characters of a hostile value quoted in a message


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _expand(expr: str, path: str, line: int | None, field: str) -> tuple[str, ...]:
    try:
        return host_list(expr, MAX_RANGE)
    except ValueError as exc:
        # the expander's own words quote the whole list again: keep only its reason, cut short
        reason = str(exc).rsplit("': ", 1)[-1] if "malformed" in str(exc) else ""
        why = f"is malformed: {_short(reason)}" if reason else f"expands to more than {MAX_RANGE:,} names"
        raise InputProblem(f"host list {_short(expr)!r} {why}", path=path, line=line, field=field) from exc


def nodes_from_hostlist(expr: str, what: str = "--nodes") -> tuple[str, ...]:
    """The nodes of a host list given outright (``n[01-16],gpu7``)."""
    if not expr.strip():
        raise InputProblem("empty host list", path=what)
    return _expand(expr.strip(), what, None, "")


def nodes_from_slurm_conf(text: str, path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every node a ``NodeName=`` line of slurm.conf defines, warnings). ``NodeName=DEFAULT``
    defines none; ``Include`` is not followed (a warning: give the included file too)."""
    names: dict[str, None] = {}
    warnings: list[str] = []
    for number, body in logical_lines(text):
        if body[:7].lower() == "include" and body[7:8].isspace():
            warnings.append(f"{path}:{number}: Include {_short(body[8:].strip())} is not read; nodes "
                            "defined there count as unknown unless that file is given with --slurm-conf too")
            continue
        kv = next_pair(body)
        if kv is None or kv.key.lower() != "nodename" or kv.value.upper() == "DEFAULT":
            continue
        for name in _expand(kv.value, path, number, "NodeName"):
            names[name] = None
            if len(names) > MAX_RANGE:
                raise InputProblem(f"defines more than {MAX_RANGE:,} nodes", path=path, line=number,
                                   field="NodeName")
    return tuple(names), tuple(warnings)


def nodes_from_scontrol(text: str, path: str) -> tuple[str, ...]:
    """The nodes of ``scontrol show nodes -o`` (one ``NodeName=`` line each), of ``scontrol show
    nodes --json`` (24.11: ``nodes[].name``) or of ``sinfo --json`` (22.05 ``nodes[].name``,
    24.11 ``sinfo[].nodes.nodes``)."""
    head = text.lstrip()[:1]
    if head in ("{", "["):
        return _json_nodes(text, path)
    names: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        word = line.strip().split(" ", 1)[0]
        if not word:
            continue
        if not word.startswith("NodeName="):
            raise InputProblem(f"expected `scontrol show nodes -o` lines (NodeName=...), got "
                               f"{_short(line.strip())!r}", path=path, line=number)
        names[word[len("NodeName="):]] = None
    if not names:
        raise InputProblem("no nodes: the node list is empty", path=path)
    return tuple(names)


def _json_nodes(text: str, path: str) -> tuple[str, ...]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputProblem(f"not JSON: {_short(str(exc))}", path=path) from exc
    found: list[str] = []
    if isinstance(data, dict) and isinstance(data.get("nodes"), list):
        found = [n["name"] for n in data["nodes"] if isinstance(n, dict) and isinstance(n.get("name"), str)]
    elif isinstance(data, dict) and isinstance(data.get("sinfo"), list):
        for row in data["sinfo"]:
            inner = row.get("nodes", {}).get("nodes", []) if isinstance(row, dict) and isinstance(
                row.get("nodes"), dict) else []
            found.extend(n for n in inner if isinstance(n, str))
    if not found:
        raise InputProblem("no nodes: expected `scontrol show nodes --json` or `sinfo --json` output "
                           "(a nodes list with names)", path=path)
    return tuple(dict.fromkeys(found))


def _compact(names: Iterable[str]) -> str:
    listed = list(names)
    try:
        text = str(hostnames.collect(listed))
    except hostnames.HostListError:
        text = ",".join(listed)
    return _short(text)


def unknown_nodes(conf: TopologyConf, known: Iterable[str]) -> tuple[Problem, ...]:
    """One error per switch or block of ``conf`` that names a node outside ``known``: the file
    slurmctld refuses (``Invalid node name (...) in switch config (...)``)."""
    cluster = frozenset(known)
    out: list[Problem] = []
    groups = [(sw.name, sw.line, sw.nodes, "switch") for sw in conf.switches]
    groups += [(b.name, b.line, b.nodes, "block") for b in conf.blocks]
    for name, line, nodes, kind in groups:
        missing = [n for n in nodes if n not in cluster]
        if missing:
            out.append(Problem(conf.path, line, "Nodes",
                               f"{kind} {_short(name)} names {len(missing)} node(s) the cluster does not "
                               f"have: {_compact(missing)} (slurmctld refuses the file: Invalid node name "
                               f"in {kind} config)", switch=name))
    return tuple(out)
