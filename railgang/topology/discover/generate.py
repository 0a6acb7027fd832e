"""Generate ``ibnetdiscover`` output for regular fabrics: fat trees (two or three levels) and
rail-optimised fabrics (one leaf per rail per scalable unit, spines per rail), in the topology
form, the topology form as ``--node-name-map`` prints it, or the ``-p`` ports form.

Used by the property tests (generate -> discover -> parse with topology/conf.py -> same nodes and
groups) and by ``benchmarks/topology/topology_discover_bench.py``. The text follows ``ibnetdiscover.c``'s
format strings; GUIDs are made up but well-formed and unique.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = ["GeneratedFabric", "Shape", "generate_ibnetdiscover"]

_VENDOR_CA = "MT4129 ConnectX-7 Mellanox Technologies"
_LANES = {"SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR": 14.0, "EDR": 25.0, "HDR": 50.0, "NDR": 100.0}


@dataclass(frozen=True)
class Shape:
    """A regular fabric.

    ``rails`` HCAs per node. Rail-optimised: the nodes of a scalable unit (``nodes_per_leaf``
    of them) cable HCA k to the unit's rail-k leaf and each rail has ``spines`` spines cabled to
    every leaf of that rail. Otherwise a fat tree: all HCAs of a node on its leaf, every leaf of a
    pod (``leaves_per_pod``, None = one pod) cabled to the pod's ``spines`` spines and, with
    several pods, every spine to each of ``cores`` core switches.
    """

    @property
    def first_spine_leaves(self) -> int:
        """Leaves cabled to the first spine (``spine_hosts`` are told from leaf hosts by them)."""
        units = -(-self.nodes // self.nodes_per_leaf)
        return units if self.rail_optimised and self.rails > 1 else min(units, self.leaves_per_pod or units)

    nodes: int
    rails: int = 8
    rail_optimised: bool = True
    nodes_per_leaf: int = 32
    spines: int = 4
    leaves_per_pod: int | None = None
    cores: int = 2
    speed: str = "NDR"
    prefix: str = "gpu"
    spine_hosts: int = 0  # storage/login hosts (``<prefix>io<k>``, one HCA) cabled to the first spine


@dataclass(frozen=True)
class GeneratedFabric:
    """The text, the node name map that names its HCAs, and the grouping discovery must find."""

    text: str
    name_map: str
    nodes: tuple[str, ...]
    groups: tuple[tuple[str, ...], ...]  # nodes of each level-1 Slurm switch, in order
    levels: int
    switches: int


@dataclass
class _Sw:
    guid: str
    name: str
    lid: int
    ports: dict[int, tuple[str, int]]  # my port -> (peer guid, peer port)


def _guid(kind: int, a: int, b: int = 0) -> str:
    return f"{kind:02x}{a:08x}{b:06x}"


def generate_ibnetdiscover(shape: Shape, form: Literal["topology", "mapped", "vendor", "ports"] = "topology") -> GeneratedFabric:
    """``form``: "topology" (NodeDescriptions are ``<host> mlx5_<k>``), "mapped" (vendor
    descriptions on Ca lines, names from ``--node-name-map`` on link lines), "vendor" (vendor
    descriptions only; discovery needs ``name_map``), "ports" (``ibnetdiscover -p``)."""
    if shape.nodes < 1 or shape.rails < 1 or shape.nodes_per_leaf < 1 or shape.spines < 0:
        raise ValueError(f"not a fabric: {shape}")
    width = len(str(shape.nodes))
    nodes = tuple(f"{shape.prefix}{i + 1:0{max(width, 3)}d}" for i in range(shape.nodes))
    units = [nodes[i:i + shape.nodes_per_leaf] for i in range(0, len(nodes), shape.nodes_per_leaf)]
    index = {n: i for i, n in enumerate(nodes)}
    switches: dict[str, _Sw] = {}
    ca_port: dict[str, tuple[str, int]] = {}  # CA guid -> (switch guid, switch port)
    lid = iter(range(1, 1 << 30))

    def switch(guid: str, name: str) -> _Sw:
        sw = switches[guid] = _Sw(guid, name, next(lid), {})
        return sw

    def cable(a: _Sw, b: _Sw) -> None:
        pa, pb = len(a.ports) + 1, len(b.ports) + 1
        a.ports[pa], b.ports[pb] = (b.guid, pb), (a.guid, pa)

    def host(sw: _Sw, node_index: int, rail: int, kind: int = 0xA0) -> None:
        g = _guid(kind, node_index, rail)
        p = len(sw.ports) + 1
        sw.ports[p] = (g, 1)
        ca_port[g] = (sw.guid, p)

    levels = 1
    if shape.rail_optimised and shape.rails > 1:
        for r in range(shape.rails):
            spines = [switch(_guid(0xE2, r, s), f"spine-r{r}-{s + 1}") for s in range(shape.spines)]
            for u, unit in enumerate(units):
                leaf = switch(_guid(0xE1, u, r), f"leaf-su{u + 1}-r{r}")
                for n in unit:
                    host(leaf, index[n], r)
                for sp in spines:
                    cable(leaf, sp)
        groups = tuple(tuple(u) for u in units)
        levels = 2 if len(units) > 1 and shape.spines else 1
    else:
        per_pod = shape.leaves_per_pod or len(units)
        pods = [list(range(i, min(i + per_pod, len(units)))) for i in range(0, len(units), per_pod)]
        cores = [switch(_guid(0xE3, c), f"core{c + 1}") for c in range(shape.cores)] if len(pods) > 1 else []
        for p, pod in enumerate(pods):
            spines = [switch(_guid(0xE2, p, s), f"spine-p{p + 1}-{s + 1}") for s in range(shape.spines)]
            for u in pod:
                leaf = switch(_guid(0xE1, u), f"leaf{u + 1}")
                for n in units[u]:
                    for r in range(shape.rails):
                        host(leaf, index[n], r)
                for sp in spines:
                    cable(leaf, sp)
            for sp in spines:
                for c in cores:
                    cable(sp, c)
        groups = tuple(tuple(u) for u in units)
        levels = 1 if len(units) == 1 or not shape.spines else (3 if cores and len(pods) > 1 else 2)
    io = tuple(f"{shape.prefix}io{k + 1}" for k in range(shape.spine_hosts if shape.spines else 0))
    for k in range(len(io)):
        host(switches[_guid(0xE2, 0, 0)], k, 0, kind=0xA1)
    if io:
        groups, levels = (*groups, io), max(levels, 2)
    name = {g: f"{(nodes if g.startswith('a0') else io)[int(g[2:10], 16)]} mlx5_{int(g[10:], 16)}" for g in ca_port}
    name_map = "".join(f'0x{g} "{n}"\n' for g, n in name.items()) + "".join(
        f'0x{s.guid} "{s.name}"\n' for s in switches.values())
    lines = (_ports_form(switches, ca_port, name, shape.speed) if form == "ports"
             else _topology_form(switches, ca_port, name, shape.speed, form))
    return GeneratedFabric("\n".join(lines) + "\n", name_map, nodes + io, groups, levels, len(switches))


def _topology_form(switches: dict[str, _Sw], ca_port: dict[str, tuple[str, int]], name: dict[str, str],
                   speed: str, form: str) -> Iterator[str]:
    ca_lid = {g: 100000 + i for i, g in enumerate(ca_port)}
    def ca_header(g: str) -> str:  # ibnetdiscover never remaps the Ca line itself
        return _VENDOR_CA if form in ("mapped", "vendor") else name[g]

    def ca_peer(g: str) -> str:
        return _VENDOR_CA if form == "vendor" else name[g]

    def sw_desc(s: _Sw) -> str:
        return "Quantum-2 Mellanox Technologies" if form == "vendor" else f"MF0;{s.name}:MQM9790/U1"

    yield "#\n# Topology file: generated by railgang's generator\n#"
    for s in switches.values():
        yield (f"\nvendid=0x2c9\ndevid=0xd2f0\nsysimgguid=0x{s.guid}\nswitchguid=0x{s.guid}({s.guid})\n"
               f'Switch\t{len(s.ports)} "S-{s.guid}"\t\t# "{sw_desc(s)}" enhanced port 0 lid {s.lid} lmc 0')
        for p, (peer, pp) in s.ports.items():
            if peer in switches:
                yield f'[{p}]\t"S-{peer}"[{pp}]\t\t# "{sw_desc(switches[peer])}" lid {switches[peer].lid} 4x{speed}'
            else:
                yield f'[{p}]\t"H-{peer}"[{pp}]({peer}) \t\t# "{ca_peer(peer)}" lid {ca_lid[peer]} 4x{speed}'
    for g, (sg, sp) in ca_port.items():
        s = switches[sg]
        yield (f"\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x{g}\ncaguid=0x{g}\n"
               f'Ca\t1 "H-{g}"\t\t# "{ca_header(g)}"\n'
               f'[1]({g}) \t"S-{sg}"[{sp}]\t\t# lid {ca_lid[g]} lmc 0 "{sw_desc(s)}" lid {s.lid} 4x{speed}')


def _ports_form(switches: dict[str, _Sw], ca_port: dict[str, tuple[str, int]], name: dict[str, str],
                speed: str) -> Iterator[str]:
    ca_lid = {g: 100000 + i for i, g in enumerate(ca_port)}
    for s in switches.values():
        for p, (peer, pp) in sorted(s.ports.items(), reverse=True):
            if peer in switches:
                o = switches[peer]
                yield (f"SW {s.lid:5d} {p:2d} 0x{s.guid} 4x {speed} - SW {o.lid:5d} {pp:2d} 0x{o.guid} "
                       f"( '{s.name}' - '{o.name}' )")
            else:
                yield (f"SW {s.lid:5d} {p:2d} 0x{s.guid} 4x {speed} - CA {ca_lid[peer]:5d} {pp:2d} 0x{peer} "
                       f"( '{s.name}' - '{name[peer]}' )")
    for g, (sg, sp) in ca_port.items():
        s = switches[sg]
        yield (f"CA {ca_lid[g]:5d}  1 0x{g} 4x {speed} - SW {s.lid:5d} {sp:2d} 0x{sg} "
               f"( '{name[g]}' - '{s.name}' )")
