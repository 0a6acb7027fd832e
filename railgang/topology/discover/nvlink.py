"""NVLink domains from ``nvidia-smi -q`` and topology/block lines from them (issue 21 item 5).

On a multi-node NVLink system (GB200/GB300 NVL72) every GPU reports, in the ``Fabric`` section of
``nvidia-smi -q``::

    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 4000000005
        ClusterUUID                       : 50000000-0000-0000-0000-000000000004

GPUs with the same ClusterUUID and CliqueId share one NVLink domain (NVIDIA's topograph keys its
domains ``<ClusterUUID>.<CliqueId>`` the same way). The input is what ``pdsh -w NODES nvidia-smi
-q`` (or ``| grep -E 'ClusterUUID|CliqueId'``) prints: every line prefixed ``host: ``. A ``GPU
0000:…`` header starts the next GPU; without headers a key seen twice does.

Everything is hostile input: a line that is not ``host: text`` is counted and skipped; a host
name Slurm could not use, a value that is neither a UUID / number nor ``N/A``, a node whose GPUs
disagree, or a node without a domain (``N/A``: fabric not registered, or no NVLink switch) is
left out of every block and reported with the node named, never a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from railgang.topology.discover.classify import Problem, natural_key
from railgang.topology.discover.emit import SlurmSwitch, slurm_hostlist

__all__ = ["NvlinkDomains", "block_lines", "domain_order", "parse_nvidia_smi", "render_block_conf", "tree_rank"]

_LINE = re.compile(r"^(?P<host>[^:\s]{1,255}):[ \t]?(?P<body>.*)$")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_FIELD = re.compile(r"^\s*(?P<key>ClusterUUID|CliqueId)\s*:\s*(?P<value>.*?)\s*$")
_GPU = re.compile(r"^\s*GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\s*$")
_UUID = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")
_NA = "N/A"
_MAX_ITEMS = 50  # per problem kind: the count says how many more


@dataclass(frozen=True)
class NvlinkDomains:
    """Nodes per NVLink domain (key ``<ClusterUUID>.<CliqueId>``) and what was left out."""

    path: str
    domains: Mapping[str, tuple[str, ...]]
    problems: tuple[Problem, ...] = ()

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(n for members in self.domains.values() for n in members)


class _Collect:
    def __init__(self) -> None:
        self.gpus: dict[str, list[dict[str, str]]] = {}
        self.problems: dict[str, list[str]] = {}
        self.counts: dict[str, int] = {}

    def problem(self, kind: str, item: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        items = self.problems.setdefault(kind, [])
        if len(items) < _MAX_ITEMS:
            items.append(item)

    def field(self, host: str, key: str, value: str) -> None:
        gpus = self.gpus.setdefault(host, [])
        if not gpus or key in gpus[-1]:
            gpus.append({})
        gpus[-1][key] = value


def parse_nvidia_smi(lines: Iterable[tuple[int, str]], path: str = "<nvidia-smi>") -> NvlinkDomains:
    """Domains from host-prefixed ``nvidia-smi -q`` lines (``iter_lines`` bounds the input)."""
    c = _Collect()
    for number, line in lines:
        m = _LINE.match(line)
        if m is None:
            if line.strip():
                c.problem("lines not 'host: text'", f"line {number}")
            continue
        host, body = m.group("host"), m.group("body")
        if _GPU.match(body):
            c.gpus.setdefault(host, []).append({})
            continue
        f = _FIELD.match(body)
        if f is None:
            continue
        if not _HOST.match(host):
            c.problem("host names Slurm cannot use", f"line {number}: {host[:64]!r}")
            continue
        c.field(host, f.group("key"), f.group("value"))
    domains: dict[str, list[str]] = {}
    for host, gpus in c.gpus.items():
        key = _node_domain(host, [g for g in gpus if g], c)
        if key is not None:
            domains.setdefault(key, []).append(host)
    problems = tuple(Problem(k, tuple(v), c.counts[k]) for k, v in c.problems.items())
    return NvlinkDomains(path, {k: tuple(sorted(v, key=natural_key)) for k, v in sorted(domains.items())},
                         problems)


def _node_domain(host: str, gpus: list[dict[str, str]], c: _Collect) -> str | None:
    if not gpus:
        return None  # a host whose lines hold no fabric field (not an NVLink system)
    keys: set[str] = set()
    for g in gpus:
        uuid, clique = g.get("ClusterUUID"), g.get("CliqueId")
        if uuid is None or clique is None:
            c.problem("nodes with a GPU missing ClusterUUID or CliqueId", host)
            return None
        if _NA in (uuid, clique):
            c.problem("nodes in no NVLink domain (N/A)", host)
            return None
        if not _UUID.match(uuid) or not clique.isascii() or not clique.isdigit() or int(clique) >= 2**32:
            c.problem("nodes with a malformed ClusterUUID or CliqueId", f"{host}: {uuid[:40]!r} {clique[:20]!r}")
            return None
        keys.add(f"{uuid.lower()}.{int(clique)}")
    if len(keys) > 1:
        c.problem("nodes whose GPUs are in different NVLink domains", host)
        return None
    return keys.pop()


def domain_order(found: NvlinkDomains, node_rank: Mapping[str, tuple[int, ...]]) -> list[str]:
    """Domains ordered by where their nodes sit in the InfiniBand tree (``node_rank``: a node's
    path of group indices from the top, e.g. (spine group, leaf group)): slurmctld aggregates
    *consecutive* blocks into the larger BlockSizes, so neighbours on the IB tree should be
    neighbours in the file. Nodes the IB side does not know sort last, then by name."""
    far = (1 << 30,)

    def key(domain: str) -> tuple[tuple[int, ...], tuple[object, ...]]:
        members = found.domains[domain]
        return min(node_rank.get(n, far) for n in members), natural_key(members[0])

    return sorted(found.domains, key=key)


def block_lines(found: NvlinkDomains, order: list[str], *, max_levels: int = 16) -> tuple[list[str], int]:
    """``BlockName=`` lines (blocks ``nvl1``… in ``order``) and a ``BlockSizes=`` line that
    slurmctld 24.11 accepts: the base is the smallest domain (a block smaller than the base is
    fatal there, block_record.c), doubled while there are blocks to aggregate. Returns the lines
    and the base size."""
    base = min(len(found.domains[d]) for d in order)
    lines = [f"BlockName=nvl{i} Nodes={slurm_hostlist(list(found.domains[d]))}  # NVLink domain {d}"
             for i, d in enumerate(order, start=1)]
    sizes = [base]
    while len(sizes) < max_levels and (1 << len(sizes)) <= len(order) and base << len(sizes) < 2**31:
        sizes.append(base << len(sizes))
    lines.append("BlockSizes=" + ",".join(map(str, sizes)))
    return lines, base


def tree_rank(tree: Iterable[SlurmSwitch]) -> dict[str, tuple[int, ...]]:
    """Each node's path of group indices from the top of the discovered IB tree (``slurm_tree``)."""
    groups = list(tree)
    index = {g.name: i for i, g in enumerate(groups)}
    parent = {kid: g.name for g in groups for kid in g.switches}
    rank: dict[str, tuple[int, ...]] = {}
    for g in groups:
        path: list[int] = []
        name: str | None = g.name
        while name is not None and len(path) < 64:
            path.append(index[name])
            name = parent.get(name)
        for n in g.nodes:
            rank.setdefault(n, tuple(reversed(path)))
    return rank


def render_block_conf(found: NvlinkDomains, ib_nodes: Iterable[str], rank: Mapping[str, tuple[int, ...]],
                      source: str) -> tuple[str, list[str]]:
    """topology.conf (topology/block) text and the warnings for what the two sources disagree on."""
    ib = set(ib_nodes)
    order = domain_order(found, rank)
    lines, base = block_lines(found, order)
    notes = []
    lonely = sorted(ib - found.nodes, key=natural_key)
    if lonely:
        notes.append(f"{len(lonely)} node(s) on the InfiniBand fabric are in no NVLink domain (slurmctld "
                     f"logs 'blocks lack access' and never gives them to a job): {', '.join(lonely[:10])}")
    unseen = sorted(found.nodes - ib, key=natural_key)
    if unseen:
        notes.append(f"{len(unseen)} node(s) of an NVLink domain are not on the InfiniBand fabric: "
                     f"{', '.join(unseen[:10])}")
    if base < max(len(v) for v in found.domains.values()):
        notes.append(f"NVLink domains differ in size ({base}-{max(len(v) for v in found.domains.values())} nodes): "
                     f"BlockSizes uses the smallest, {base}")
    head = [f"# topology.conf (topology/block) written by `railgang topology discover` from {source}",
            f"# {len(order)} NVLink domain(s), {len(found.nodes)} nodes; blocks in InfiniBand tree order"]
    return "\n".join(head + lines) + "\n", notes
