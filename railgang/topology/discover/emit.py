"""Write what discovery found: a Slurm ``topology.conf`` (topology/tree grammar, host lists
compressed with python-hostlist) and the fabric facts (JSON-ready dict).

Slurm's tree wants every node under exactly one leaf and every switch under one parent, but on a
rail-optimised fabric a node is cabled to one leaf *per rail*. So the Slurm switches are groups:

1. Level 1: nodes cabled to the same set of physical leaves form one group (on a classic fat tree
   that is one leaf; on a rail-optimised fabric the scalable unit's 8 rail leaves).
2. Level k+1: groups whose switches share a switch one level up are joined (union-find), until
   one group is left or nothing is above. Several tops get a ``root`` above them.

A group that is exactly one physical switch keeps that switch's name; other groups are named
``su<n>`` (level 1), ``spines<n>``, ``cores<n>`` above. Hop counts in the written tree therefore equal
the physical ones for traffic on one rail, which is what slurmctld's topology/tree uses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from railgang.topology import hostnames
from railgang.topology.discover.classify import FabricFacts, natural_key

__all__ = ["FACTS_FORMAT", "SlurmSwitch", "facts_json", "render_conf", "slurm_hostlist", "slurm_tree"]

FACTS_FORMAT = "railgang-fabric-facts/1"
_LEVEL_NAMES = {1: "su", 2: "spines", 3: "cores"}


@dataclass(frozen=True)
class SlurmSwitch:
    """One ``SwitchName=`` line: ``nodes`` for a leaf group, ``switches`` for the groups above."""

    name: str
    level: int
    members: tuple[str, ...]  # physical switch GUIDs the group stands for (empty for a made-up root)
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()
    link_gbps: float | None = None


class _Groups:
    def __init__(self, keys: list[str]) -> None:
        self.parent = {k: k for k in keys}

    def find(self, k: str) -> str:
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


_TAIL = re.compile(r"^(.*?)(\d*)$")


def slurm_hostlist(names: list[str]) -> str:
    """A host list slurmctld 22.05 reads: ranges only on the trailing number (``gpu[001-064]``).

    python-hostlist would also write ``leaf-su[1-4]-r0`` (a range inside the name), which Slurm
    refuses ("text after ']'"), so names are compressed in groups that differ only in their last
    digits. Names made from GUIDs (``ib-<guid>``) are listed as they are: a range over their hex
    tails would only obscure them.
    """
    groups: dict[str, list[str]] = {}
    for name in names:
        m = _TAIL.match(name)
        prefix = m.group(1) if m and not name.startswith("ib-") else name
        groups.setdefault(prefix, []).append(name)
    return ",".join(hostnames.collect(g) if len(g) > 1 else g[0] for g in groups.values())


def _rate(facts: FabricFacts, guids: tuple[str, ...], hosts: tuple[str, ...]) -> float | None:
    rates = [h.gbps for n in hosts for h in facts.hosts[n] if h.gbps is not None and h.switch in guids]
    return max(set(rates), key=rates.count) if rates else None


def slurm_tree(facts: FabricFacts) -> tuple[SlurmSwitch, ...]:
    """The Slurm switch groups, leaves first, then each level up, the root last."""
    sw = facts.switches
    by_set: dict[tuple[str, ...], list[str]] = {}
    for host, hcas in facts.hosts.items():
        key = tuple(sorted({h.switch for h in hcas if h.switch is not None}))
        if key:
            by_set.setdefault(key, []).append(host)
    names_used = set(facts.hosts)
    physical = {s.name for s in sw.values()}
    out: list[SlurmSwitch] = []

    def name_for(members: tuple[str, ...], level: int, index: int) -> str:
        if len(members) == 1 and sw[members[0]].name not in names_used:
            name = sw[members[0]].name
        else:
            base = f"{_LEVEL_NAMES.get(level, f'level{level}-')}{index}"
            name, n = base, 1
            while name in names_used or name in physical:
                n += 1
                name = f"{base}-{n}"
        names_used.add(name)
        return name

    # Level 1, ordered by their first host so that names follow the node order.
    current: list[SlurmSwitch] = []
    for i, (members, hosts) in enumerate(sorted(by_set.items(), key=lambda kv: natural_key(kv[1][0])), start=1):
        group = SlurmSwitch(name_for(members, 1, i), 1, members, nodes=tuple(hosts),
                            link_gbps=_rate(facts, members, tuple(hosts)))
        current.append(group)
    out.extend(current)
    level = 1
    while len(current) > 1:
        ups = {g.name: {u for m in g.members for u in sw[m].up} for g in current}
        if not any(ups.values()):
            break
        uf = _Groups([g.name for g in current])
        owner: dict[str, str] = {}
        for g in current:
            for u in ups[g.name]:
                if u in owner:
                    uf.join(owner[u], g.name)
                else:
                    owner[u] = g.name
        for g in current:  # a spine carrying a host or two joins the leaves it is above
            for m in g.members:
                if m in owner:
                    uf.join(owner[m], g.name)
        merged: dict[str, list[SlurmSwitch]] = {}
        for g in current:
            merged.setdefault(uf.find(g.name), []).append(g)
        level += 1
        nxt: list[SlurmSwitch] = []
        for i, kids in enumerate(merged.values(), start=1):
            members = tuple(sorted({u for k in kids for u in ups[k.name]} | {
                m for k in kids for m in k.members if m in owner}))
            if not members:  # nothing above this group: it stays a top as it is
                nxt.extend(kids)
                continue
            group = SlurmSwitch(name_for(members, level, i), level, members,
                                switches=tuple(k.name for k in kids))
            nxt.append(group)
            out.append(group)
        current = nxt
    if len(current) > 1:
        root, n = "root", 1
        while root in names_used or root in physical:
            n += 1
            root = f"root-{n}"
        out.append(SlurmSwitch(root, level + 1, (), switches=tuple(g.name for g in current)))
    return tuple(out)


def render_conf(facts: FabricFacts, tree: tuple[SlurmSwitch, ...] | None = None) -> str:
    """topology.conf text: a header naming the source, then one ``SwitchName=`` line per group."""
    tree = slurm_tree(facts) if tree is None else tree
    lines = [f"# topology.conf written by `railgang topology discover` from {facts.path}",
             f"# {len(facts.hosts)} nodes, {len(facts.switches)} switches in {facts.levels} level(s), "
             f"{facts.rails} rail(s){', rail-optimised' if facts.rail_optimised else ''}"]
    for g in tree:
        parts = [f"SwitchName={g.name}"]
        if g.nodes:
            parts.append(f"Nodes={slurm_hostlist(list(g.nodes))}")
        if g.switches:
            parts.append(f"Switches={slurm_hostlist(list(g.switches))}")
        if g.link_gbps:
            parts.append(f"LinkSpeed={round(g.link_gbps)}")
        if len(g.members) > 1 or (g.members and facts.switches[g.members[0]].name != g.name):
            parts.append("# " + slurm_hostlist([facts.switches[m].name for m in g.members]))
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


def facts_json(facts: FabricFacts, tree: tuple[SlurmSwitch, ...] | None = None) -> dict[str, Any]:
    """The fabric facts as a JSON-ready dict (``format`` names the schema; docs/topology.md)."""
    tree = slurm_tree(facts) if tree is None else tree
    sw = facts.switches
    group_of = {m: g.name for g in tree for m in g.members}

    def rates(table: Mapping[float, int]) -> dict[str, int]:
        return {f"{k:g}": v for k, v in table.items()}

    return {
        "format": FACTS_FORMAT,
        "source": facts.path,
        "form": facts.form,
        "nodes_count": len(facts.hosts),
        "hcas_count": sum(len(h) for h in facts.hosts.values()),
        "switches_count": len(sw),
        "levels": facts.levels,
        "rails": facts.rails,
        "rail_optimised": facts.rail_optimised,
        "link_gbps": {k: rates(v) for k, v in facts.link_rates.items()},
        "switches": [{"name": s.name, "guid": s.guid, "description": s.description, "level": s.level,
                      "rail": s.rail, "slurm_switch": group_of.get(s.guid), "hosts": len(s.hosts),
                      "up": [sw[u].name for u in s.up]} for s in sw.values()],
        "nodes": {host: {"hcas": [{"name": h.name, "guid": h.guid, "port": h.port, "rail": h.rail,
                                   "switch": sw[h.switch].name if h.switch else None, "gbps": h.gbps}
                                  for h in hcas]} for host, hcas in facts.hosts.items()},
        "unclassified": {p.kind: {"count": p.count, "items": list(p.items)} for p in facts.problems},
    }
