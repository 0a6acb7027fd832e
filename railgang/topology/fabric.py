"""The fabric: switches, nodes and GPUs as an immutable graph with a cheap distance function.

A ``Fabric`` is built once (from ``topology.conf`` or from a shape) and then only read, thousands of
times per scheduling cycle, so everything placement needs (ancestor chains, leaf of a node, the
NVLink domain of a node) is precomputed into plain dicts; the networkx graph is kept for
inspection, export and path queries, not for the hot path.

Distances are hop counts to the lowest common switch: 0 same node (or same multi-node NVLink
domain), 1 same leaf, 2 same spine, 3 across the core, and so on for deeper trees. Nodes in
disconnected trees are one further than the deepest tree allows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import networkx as nx

from railgang.topology import hostnames
from railgang.topology.conf import NO_NODES, Problem, TopologyConf, TopologyError, parse_topology
from railgang.topology.files import InputProblem, read_text

__all__ = [
    "Fabric",
    "NodeFacts",
    "fabric_from_conf",
    "fabric_from_shape",
    "fabric_from_text",
    "load_fabric",
    "render_topology",
]


@dataclass(frozen=True)
class NodeFacts:
    """What placement needs to know about one node.

    ``nvlink_domain`` names a multi-node NVLink domain (e.g. an NVL72 rack); ``None`` means the
    node is its own domain. ``nvlink`` is False for PCIe-only nodes, which cannot host a
    tensor-parallel group wider than one GPU at NVLink speed.
    """

    name: str
    gpus: int = 8
    gpu_type: str = "gpu"
    gpu_mem_gb: float = 80.0
    nvlink_domain: str | None = None
    nvlink: bool = True
    features: frozenset[str] = frozenset()


class Fabric:
    """An immutable switch tree with nodes at its leaves and GPUs on rails.

    ``children`` maps each switch to its child switches, ``leaf_nodes`` maps each switch to the
    nodes directly attached to it (a switch may have both). GPU ``k`` of every node hangs off
    rail ``k``; on a rail-optimised fabric (``rail_optimised=True``) traffic between different
    rails of different nodes must leave the leaf, so it counts one level further.
    """

    def __init__(
        self,
        children: Mapping[str, Sequence[str]],
        leaf_nodes: Mapping[str, Sequence[str]],
        facts: Mapping[str, NodeFacts] | None = None,
        *,
        link_speed: Mapping[str, float] | None = None,
        rail_optimised: bool = True,
        default_gpus: int = 8,
        name: str = "fabric",
    ) -> None:
        self.name = name
        self.rail_optimised = rail_optimised
        child_list = [c for kids in children.values() for c in kids]
        switches = list(dict.fromkeys([*children, *leaf_nodes, *child_list]))
        child_set = set(child_list)
        roots = [s for s in switches if s not in child_set]
        self.roots: tuple[str, ...] = tuple(roots)
        self._children = {s: tuple(children.get(s, ())) for s in switches}
        self._height = self._heights()  # also rejects cycles, which would make every walk endless
        self._parent: dict[str, str] = {}
        for parent, kids in self._children.items():
            for kid in kids:
                self._parent[kid] = parent
        self.link_speed: Mapping[str, float] = MappingProxyType(dict(link_speed or {}))

        # Topology order: depth-first from each root, leaves in the order they were declared,
        # so that "consecutive nodes" means "close in the tree" for every consumer.
        order: list[str] = []
        leaf_of: dict[str, str] = {}
        seen: set[str] = set()

        def visit(switch: str) -> None:
            if switch in seen:  # defensive: the parser already rejects cycles
                return
            seen.add(switch)
            for node in leaf_nodes.get(switch, ()):
                if node not in leaf_of:
                    leaf_of[node] = switch
                    order.append(node)
            for kid in self._children[switch]:
                visit(kid)

        for root in roots:
            visit(root)
        self.nodes: tuple[str, ...] = tuple(order)
        self._leaf_of = leaf_of
        self._index = {n: i for i, n in enumerate(order)}
        given = dict(facts or {})
        self._facts = {n: given.get(n) or NodeFacts(name=n, gpus=default_gpus) for n in order}

        self._chain: dict[str, tuple[str, ...]] = {}
        self._depth_of: dict[str, dict[str, int]] = {}
        for node in order:
            chain = [leaf_of[node]]
            while chain[-1] in self._parent and len(chain) <= len(switches):
                chain.append(self._parent[chain[-1]])
            self._chain[node] = tuple(chain)
            self._depth_of[node] = {s: i for i, s in enumerate(chain)}
        self.depth = max((len(c) for c in self._chain.values()), default=0)

        leaves = [s for s in switches if leaf_nodes.get(s)]
        self.leaves: tuple[str, ...] = tuple(sorted(leaves, key=lambda s: self._index[leaf_nodes[s][0]]))
        self._leaf_members = {s: tuple(n for n in leaf_nodes.get(s, ()) if leaf_of.get(n) == s) for s in switches}
        under: dict[str, list[str]] = {s: [] for s in switches}
        for node in order:
            for s in self._chain[node]:
                under[s].append(node)
        self._under = {s: tuple(m) for s, m in under.items()}

        domains: dict[str, list[str]] = {}
        for node in order:
            domains.setdefault(self.domain_of(node), []).append(node)
        self.domains: Mapping[str, tuple[str, ...]] = MappingProxyType({d: tuple(m) for d, m in domains.items()})
        self.rails = max((f.gpus for f in self._facts.values()), default=0)
        self.max_node_gpus = self.rails
        self.max_domain_gpus = max((sum(self._facts[n].gpus for n in m) for m in self.domains.values()), default=0)
        self.multi_node_domains = any(len(m) > 1 for m in self.domains.values())
        # Hot-path tuple per node for the placement scan: (gpus, gpu_mem_gb, nvlink, index, leaf).
        self._hot = {n: (f.gpus, f.gpu_mem_gb, f.nvlink, self._index[n], leaf_of[n])
                     for n, f in self._facts.items()}
        self.graph = self._build_graph()

    # -- queries used on the hot path -------------------------------------------------------

    def facts(self, node: str) -> NodeFacts:
        """The facts of ``node`` (KeyError if the node is not in the fabric)."""
        return self._facts[node]

    def __contains__(self, node: object) -> bool:
        return node in self._facts

    def hot(self, node: str) -> tuple[int, float, bool, int, str] | None:
        """``(gpus, gpu_mem_gb, nvlink, index, leaf)`` of ``node``, or None if unknown (hot path)."""
        return self._hot.get(node)

    def index(self, node: str) -> int:
        """Position of ``node`` in topology order."""
        return self._index[node]

    def leaf_of(self, node: str) -> str:
        """The switch ``node`` is directly attached to."""
        return self._leaf_of[node]

    def ancestors(self, node: str) -> tuple[str, ...]:
        """Switches from the leaf of ``node`` up to its root."""
        return self._chain[node]

    def ancestor(self, node: str, height: int) -> str:
        """The switch ``height`` levels above the node's leaf (clamped to the root)."""
        chain = self._chain[node]
        return chain[min(height, len(chain) - 1)]

    def domain_of(self, node: str) -> str:
        """The NVLink domain of ``node``: its configured domain, or the node itself."""
        return self._facts[node].nvlink_domain or node

    def distance(self, node_a: str, node_b: str) -> int:
        """Hops to the lowest common switch: 0 same node/NVLink domain, 1 same leaf, 2 same spine, …"""
        if node_a == node_b:
            return 0
        if self.domain_of(node_a) == self.domain_of(node_b):
            return 0
        depth_b = self._depth_of[node_b]
        for i, switch in enumerate(self._chain[node_a]):
            j = depth_b.get(switch)
            if j is not None:
                return max(i, j) + 1
        return self.depth + 1

    def gpu_distance(self, a: tuple[str, int], b: tuple[str, int]) -> int:
        """Distance between two GPUs; on rail-optimised fabrics a change of rail costs one level."""
        d = self.distance(a[0], b[0])
        if d == 0 or not self.rail_optimised or a[1] == b[1]:
            return d
        return d + 1

    def path_switches(self, node_a: str, node_b: str) -> tuple[str, ...]:
        """Switches a packet from ``node_a`` to ``node_b`` crosses (up to the common switch and down)."""
        if node_a == node_b:
            return ()
        chain_a, depth_b = self._chain[node_a], self._depth_of[node_b]
        for i, switch in enumerate(chain_a):
            j = depth_b.get(switch)
            if j is not None:
                return chain_a[: i + 1] + tuple(reversed(self._chain[node_b][:j]))
        return chain_a + tuple(reversed(self._chain[node_b]))

    # -- structure ------------------------------------------------------------------------------

    @property
    def switches(self) -> tuple[str, ...]:
        """All switches, parents before children."""
        return tuple(self._children)

    def children(self, switch: str) -> tuple[str, ...]:
        """Child switches of ``switch``."""
        return self._children[switch]

    def parent(self, switch: str) -> str | None:
        """Parent switch, or None for a root."""
        return self._parent.get(switch)

    def nodes_under(self, switch: str) -> tuple[str, ...]:
        """Every node below ``switch``, in topology order."""
        return self._under.get(switch, ())

    def direct_nodes(self, switch: str) -> tuple[str, ...]:
        """Nodes attached directly to ``switch``."""
        return self._leaf_members.get(switch, ())

    def height(self, switch: str) -> int:
        """Levels above the nodes: 1 for a leaf, 2 for a spine, …"""
        return self._height[switch]

    def _heights(self) -> dict[str, int]:
        heights: dict[str, int] = {}
        visiting: set[str] = set()

        def h(switch: str) -> int:
            if switch in heights:
                return heights[switch]
            if switch in visiting:
                raise ValueError(f"switch {switch!r} is part of a cycle")
            visiting.add(switch)
            heights[switch] = 1 + max((h(k) for k in self._children[switch]), default=0)
            return heights[switch]

        for switch in self._children:
            h(switch)
        return heights

    @property
    def total_gpus(self) -> int:
        """GPUs in the whole fabric."""
        return sum(f.gpus for f in self._facts.values())

    def _build_graph(self) -> nx.Graph:
        graph = nx.Graph(name=self.name)
        for switch in self._children:
            graph.add_node(switch, kind="switch", height=self.height(switch))
        for parent, kids in self._children.items():
            for kid in kids:
                graph.add_edge(parent, kid, speed=self.link_speed.get(kid))
        for node in self.nodes:
            f = self._facts[node]
            leaf = self._leaf_of[node]
            graph.add_node(node, kind="node", gpus=f.gpus, gpu_type=f.gpu_type, gpu_mem_gb=f.gpu_mem_gb,
                           nvlink_domain=self.domain_of(node))
            if not self.rail_optimised:
                graph.add_edge(leaf, node, speed=self.link_speed.get(leaf))
                continue
            # Rail-optimised: the leaf is a group of rail switches, GPU k's NIC on rail switch k.
            for k in range(f.gpus):
                rail = self.rail_switch(node, k)
                if rail not in graph:
                    graph.add_node(rail, kind="rail", rail=k, height=1)
                    graph.add_edge(leaf, rail, speed=self.link_speed.get(leaf))
                graph.add_edge(rail, node, rail=k, speed=self.link_speed.get(leaf))
        return nx.freeze(graph)

    def rail_switch(self, node: str, rail: int) -> str:
        """Name of the rail switch GPU ``rail`` of ``node`` hangs off (``leaf/rail<k>``)."""
        return f"{self._leaf_of[node]}/rail{rail}"

    def __repr__(self) -> str:
        return (f"Fabric({self.name!r}, nodes={len(self.nodes)}, leaves={len(self.leaves)}, "
                f"depth={self.depth}, gpus={self.total_gpus})")


def _names(prefix: str, count: int, width: int) -> list[str]:
    return [f"{prefix}{i:0{width}d}" for i in range(1, count + 1)]


def fabric_from_shape(
    nodes: int,
    gpus_per_node: int = 8,
    nodes_per_leaf: int = 4,
    leaves_per_spine: int | None = None,
    *,
    gpu_mem_gb: float = 80.0,
    gpu_type: str = "gpu",
    prefix: str = "n",
    rail_optimised: bool = True,
) -> Fabric:
    """A regular fat tree: ``nodes`` nodes (``n01``…, zero-padded), leaves ``s1``…, spines ``spine1``….

    Without ``leaves_per_spine`` every leaf hangs off one root ``core`` (two levels); with it,
    leaves group into spines under ``core`` (three levels). The last leaf/spine may be partial.
    """
    if nodes < 1 or gpus_per_node < 1 or nodes_per_leaf < 1:
        raise ValueError("nodes, gpus_per_node and nodes_per_leaf must be positive")
    if leaves_per_spine is not None and leaves_per_spine < 1:
        raise ValueError("leaves_per_spine must be positive")
    width = max(2, len(str(nodes)))
    names = _names(prefix, nodes, width)
    leaf_nodes: dict[str, list[str]] = {}
    for i, node in enumerate(names):
        leaf_nodes.setdefault(f"s{i // nodes_per_leaf + 1}", []).append(node)
    leaves = list(leaf_nodes)
    children: dict[str, list[str]] = {}
    if leaves_per_spine is None:
        children["core"] = leaves
    else:
        spines: dict[str, list[str]] = {}
        for i, leaf in enumerate(leaves):
            spines.setdefault(f"spine{i // leaves_per_spine + 1}", []).append(leaf)
        children["core"] = list(spines)
        children.update(spines)
    facts = {n: NodeFacts(n, gpus_per_node, gpu_type, gpu_mem_gb) for n in names}
    return Fabric(children, leaf_nodes, facts, rail_optimised=rail_optimised,
                  name=f"shape-{nodes}x{gpus_per_node}")


def nodes_in_order(fabric: Fabric, names: Iterable[str]) -> list[str]:
    """``names`` that exist in ``fabric``, sorted in topology order."""
    return sorted((n for n in names if n in fabric), key=fabric.index)


def fabric_from_conf(
    conf: TopologyConf,
    facts: Mapping[str, NodeFacts] | None = None,
    default_gpus: int = 8,
    *,
    blocks_are_nvlink: bool = False,
    rail_optimised: bool = True,
) -> Fabric:
    """Build the fabric of a parsed topology.

    For topology/block each block is a leaf; ``BlockSizes`` aggregates consecutive base blocks
    into higher levels (as slurmctld plans them), all under one root ``blocks``. With
    ``blocks_are_nvlink`` a block is also a multi-node NVLink domain (GB200 NVL72 style), unless
    the facts name another domain.
    """
    given = dict(facts or {})
    all_facts = {n: given.get(n) or NodeFacts(name=n, gpus=default_gpus) for n in conf.nodes}
    if conf.kind == "tree":
        children = {sw.name: list(sw.switches) for sw in conf.switches}
        leaf_nodes = {sw.name: list(sw.nodes) for sw in conf.switches if sw.nodes}
        speeds = {sw.name: float(sw.link_speed) for sw in conf.switches if sw.link_speed}
        return Fabric(children, leaf_nodes, all_facts, link_speed=speeds,
                      rail_optimised=rail_optimised, default_gpus=default_gpus, name=conf.path)
    # slurmctld 24.11 accepts a node in two blocks (a warning here): it belongs to the first
    seen: set[str] = set()
    leaf_nodes = {}
    for b in conf.blocks:
        mine = [n for n in dict.fromkeys(b.nodes) if n not in seen]
        seen.update(mine)
        if mine:
            leaf_nodes[b.name] = mine
    blocks = [b for b in conf.blocks if b.name in leaf_nodes]
    if blocks_are_nvlink:
        for b in blocks:
            for n in leaf_nodes[b.name]:
                if all_facts[n].nvlink_domain is None:
                    all_facts[n] = replace(all_facts[n], nvlink_domain=b.name)
    level = [b.name for b in blocks]
    children_b: dict[str, list[str]] = {}
    base = conf.block_sizes[0] if conf.block_sizes else 0
    for k, size in enumerate(conf.block_sizes[1:], start=1):
        per = max(1, size // base)
        if per <= 1 or len(level) <= 1:
            continue
        groups: dict[str, list[str]] = {}
        for i, child in enumerate(level):
            groups.setdefault(f"blocks{k}_{i // per + 1}", []).append(child)
        children_b.update(groups)
        level = list(groups)
    children_b["blocks"] = level
    return Fabric(children_b, leaf_nodes, all_facts, rail_optimised=rail_optimised,
                  default_gpus=default_gpus, name=conf.path)


def fabric_from_text(
    text: str,
    source: str,
    facts: Mapping[str, NodeFacts] | Callable[[Sequence[str]], Mapping[str, NodeFacts]] | None = None,
    default_gpus: int = 8,
    *,
    blocks_are_nvlink: bool = False,
    rail_optimised: bool = True,
    empty_ok: bool = False,
) -> Fabric:
    """The one way from a ``topology.conf`` text to a fabric: the daemon, ``railgang topology``,
    ``railgang top``, the report and the replay all come here, so they see the same fabric.

    ``source`` names the text in every problem (the file, or ``scontrol show topology``).
    ``facts`` is a table by node name, or a function of the file's node names (the facts of a
    description whose default applies to every node it does not list); nodes without facts get
    ``default_gpus`` GPUs and default facts. Raises ``topology.conf.TopologyError`` (with
    file:line problems) for an invalid text, and for one that names no nodes (empty, comments only:
    nothing could be placed on it) unless ``empty_ok``: a cluster without a topology plugin, whose
    ``scontrol show topology`` lists nothing, is still a cluster to the daemon.
    """
    conf = parse_topology(text, source)
    if not conf.nodes and not empty_ok:
        raise TopologyError((Problem(source, None, None, NO_NODES),))
    table = facts(conf.nodes) if callable(facts) else facts
    return fabric_from_conf(conf, table, default_gpus, blocks_are_nvlink=blocks_are_nvlink,
                            rail_optimised=rail_optimised)


def load_fabric(
    topology_conf: Path,
    facts: Mapping[str, NodeFacts] | None = None,
    default_gpus: int = 8,
    *,
    blocks_are_nvlink: bool = False,
    rail_optimised: bool = True,
) -> Fabric:
    """Read, validate and build a fabric from a ``topology.conf`` file (``fabric_from_text``).

    Raises ``topology.conf.TopologyError`` (with file:line problems) as ``fabric_from_text`` does,
    and for a file that cannot be read (missing, a directory, binary, not UTF-8, over
    ``files.MAX_TEXT_BYTES`` or never ending like ``/dev/zero``: read through the bounded
    ``files.read_text``).
    """
    path = Path(topology_conf)
    try:
        text = read_text(path, "topology file")
    except InputProblem as exc:
        raise TopologyError((Problem(exc.path, exc.line, exc.field, exc.message),)) from exc
    return fabric_from_text(text, str(path), facts, default_gpus, blocks_are_nvlink=blocks_are_nvlink,
                            rail_optimised=rail_optimised)


def render_topology(fabric: Fabric) -> str:
    """The fabric as a topology/tree ``topology.conf`` (leaves first, then upward), e.g. to hand a
    generated shape to Slurm or to ``railgang place``."""
    lines = [f"# {fabric.name}: {len(fabric.nodes)} nodes, {len(fabric.leaves)} leaves, {fabric.depth} levels"]
    for switch in sorted(fabric.switches, key=lambda sw: (fabric.height(sw), fabric.switches.index(sw))):
        parts = [f"SwitchName={switch}"]
        direct = fabric.direct_nodes(switch)
        if direct:
            parts.append(f"Nodes={hostnames.collect(list(direct))}")
        kids = fabric.children(switch)
        if kids:
            parts.append(f"Switches={hostnames.collect(list(kids))}")
        speed = fabric.link_speed.get(switch)
        if speed:
            parts.append(f"LinkSpeed={int(speed)}")
        lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"
