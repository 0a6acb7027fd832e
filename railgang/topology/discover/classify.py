"""Classify a parsed capture: which CAs are hosts (and which HCA of each), which switches are
leaves, spines or cores, which rail each leaf serves, the link rates, and what does not fit.

Rules, each the simplest one an HPC network engineer would accept:

1. A CA is a host HCA when its name (the node name map's, else the NodeDescription) reads
   ``<host> <hca>`` (``gpu001 mlx5_0``, ``node018 HCA-1``) or is a bare host name. Vendor
   defaults (``MT23108 InfiniHost Mellanox Technologies``), SHARP aggregation nodes, routers and
   devices of unknown type are *unknown devices*.
2. A switch cabled to a host HCA is level 1 (leaf), unless it is a spine carrying a host or two
   (half or more of its switch links go to host-bearing switches, one of them busier, and it has
   no more hosts than switch links: those hosts are reported); every other switch is one level
   above the lowest switch it is cabled to (breadth first). A switch no host can reach is *a
   switch with no hosts*.
3. Rails: the HCAs of a host, in natural name order, are rails 0, 1, … unless a rail map says
   otherwise; a leaf serves the rail most of its HCAs are on. The fabric is rail-optimised when
   most multi-HCA hosts spread their HCAs over several leaves; then an HCA cabled to a leaf of
   another rail is *off-rail*.
4. Link rates are width x lane rate (4x NDR = 400 Gb/s); a link slower than most of its kind
   (host or switch links) is reported, since a 4x DDR uplink in an EDR tree is a bad cable.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from railgang.topology.discover.ibnetdiscover import Discovery, Link
from railgang.topology.discover.maps import RailMap

__all__ = ["FabricFacts", "Hca", "Problem", "SwitchInfo", "classify", "host_and_hca", "natural_key", "switch_name"]

_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_HCA = re.compile(r"^(mlx\d+_\d+|HCA-\d+|hfi\d+_\d+|qib\d+|mthca\d+|ibp\S+|ib\d+|irdma\d+|bnxt_re\d+|[a-z]+\d*_\d+)$",
                  re.IGNORECASE)
_VENDOR_WORDS = {"mellanox", "technologies", "infinihost", "nvidia", "voltaire", "qlogic", "intel", "aggregation"}
_MANAGED = re.compile(r"^MF0;([^:]+):")  # Mellanox/NVIDIA managed switch: "MF0;<hostname>:<model>/U1"
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True)
class Hca:
    """One host port cabled to a switch: ``switch`` is that switch's GUID."""

    host: str
    name: str
    guid: str
    port: int
    switch: str
    gbps: float | None
    rail: int


@dataclass(frozen=True)
class SwitchInfo:
    """One switch: ``level`` 1 = leaf (None: no host below), ``rail`` of a rail-optimised leaf."""

    guid: str
    name: str
    description: str
    level: int | None
    rail: int | None
    hosts: tuple[str, ...]
    up: tuple[str, ...]


@dataclass(frozen=True)
class Problem:
    """One kind of thing that could not be classified, with every instance (the CLI caps them)."""

    kind: str
    items: tuple[str, ...]
    count: int  # may exceed len(items) (lines not understood keep only the first numbers)


@dataclass(frozen=True)
class FabricFacts:
    """The classified fabric: hosts and their HCAs, switches by GUID, rails, levels, problems."""

    path: str
    form: str
    hosts: Mapping[str, tuple[Hca, ...]]
    switches: Mapping[str, SwitchInfo]
    levels: int
    rails: int
    rail_optimised: bool
    link_rates: Mapping[str, Mapping[float, int]]
    problems: tuple[Problem, ...] = field(default=())

    def problem(self, kind: str) -> tuple[str, ...]:
        """The items of one problem kind (empty when there are none)."""
        return next((p.items for p in self.problems if p.kind == kind), ())


def host_and_hca(name: str) -> tuple[str, str | None] | None:
    """``gpu001 mlx5_0`` -> (gpu001, mlx5_0); ``gpu001`` -> (gpu001, None); vendor text -> None."""
    words = name.split()
    if not words or any(w.lower() in _VENDOR_WORDS for w in words):
        return None
    if len(words) == 1 and _HOST.match(words[0]):
        return words[0], None
    if len(words) == 2 and _HOST.match(words[0]) and _HCA.match(words[1]):
        return words[0], words[1]
    return None


def switch_name(description: str, guid: str) -> str | None:
    """A Slurm-usable switch name from its NodeDescription, or None when it has none of its own."""
    text = description.strip()
    m = _MANAGED.match(text)
    if m:
        text = m.group(1).strip()
    return text if _HOST.match(text) and text.lower() not in _VENDOR_WORDS else None


def natural_key(text: str) -> tuple[object, ...]:
    """Sort key that puts ``gpu2`` before ``gpu10`` and ``mlx5_2`` before ``mlx5_10``."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(text))


def _true_leaves(hosts: Mapping[str, tuple[Hca, ...]], switch_links: Mapping[str, set[str]]) -> set[str]:
    """Switches with hosts, less the spines that merely carry a few (a storage or login node on a
    spine): a host-bearing switch is a spine when half or more of its switch links (two at least)
    go to other host-bearing switches, one of them busier, and it has no more hosts than switch
    links. If that leaves nothing, all count."""
    count: Counter[str] = Counter(h.switch for hcs in hosts.values() for h in hcs)
    spines = set()
    for sw, n in count.items():
        peers = switch_links.get(sw, set())
        bearing = [count[p] for p in peers if p in count]
        if len(bearing) >= 2 and len(bearing) * 2 >= len(peers) and max(bearing) > n and n <= len(peers):
            spines.add(sw)
    return (set(count) - spines) or set(count)


def _levels(leaves: set[str], switch_links: Mapping[str, set[str]]) -> dict[str, int]:
    level = {s: 1 for s in leaves}
    frontier = sorted(leaves)
    while frontier:
        nxt: list[str] = []
        for s in frontier:
            for peer in sorted(switch_links.get(s, ())):
                if peer not in level:
                    level[peer] = level[s] + 1
                    nxt.append(peer)
        frontier = nxt
    return level


@dataclass
class _Cables:
    """The links sorted by what they join: host ports (to a switch or not) and switch pairs."""

    host_ports: dict[str, list[tuple[int, str | None, Link]]] = field(default_factory=lambda: defaultdict(list))
    switch_links: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    rated: list[tuple[str, Link]] = field(default_factory=list)  # ("host" | "switch", link with a known rate)


def classify(found: Discovery, names: Mapping[str, str] | None = None, rail_map: RailMap | None = None) -> FabricFacts:
    """Classify ``found``; ``names`` (GUID -> name) overrides NodeDescriptions, ``rail_map`` HCA rails.

    1. name every device, tell host HCAs from unknown devices; 2. sort the cables; 3. the HCAs of
    each host; 4. switch levels; 5. rails; 6. switches; 7. what could not be classified.
    """
    dev = found.devices
    label = {g: (names or {}).get(g, d.description) for g, d in dev.items()}
    host_of, unknown = _host_cas(found, label)
    cables = _cables(found, host_of)
    hosts = _host_hcas(host_of, cables, rail_map or {})
    level = _levels(_true_leaves(hosts, cables.switch_links), cables.switch_links)
    leaf_rail, rail_optimised = _rails(hosts)
    switches = _switches(found, label, hosts, level, cables.switch_links, leaf_rail if rail_optimised else {})
    rates = {k: Counter(lk.gbps for kind, lk in cables.rated if kind == k and lk.gbps is not None)
             for k in ("host", "switch")}
    problems = _problems(found, label, host_of, cables, hosts, switches, leaf_rail if rail_optimised else {},
                         rates, unknown)
    return FabricFacts(
        found.path, found.form, hosts, switches, max(level.values(), default=0),
        len(set(leaf_rail.values())) if rail_optimised else (1 if hosts else 0), rail_optimised,
        {k: dict(sorted(c.items())) for k, c in rates.items()}, problems)


def _host_cas(found: Discovery, label: Mapping[str, str]) -> tuple[dict[str, tuple[str, str | None]], list[str]]:
    host_of: dict[str, tuple[str, str | None]] = {}
    unknown: list[str] = []
    for g, d in found.devices.items():
        hh = host_and_hca(label[g]) if d.kind == "ca" else None
        if hh is not None:
            host_of[g] = hh
        elif d.kind != "switch":
            unknown.append(f"{d.kind} {g} {label[g]!r}" + (f" (line {d.line})" if d.line else ""))
    return host_of, unknown


def _cables(found: Discovery, host_of: Mapping[str, tuple[str, str | None]]) -> _Cables:
    dev = found.devices
    out = _Cables()
    for lk in found.links:
        if dev[lk.a].kind == "switch" and dev[lk.b].kind == "switch":
            out.switch_links[lk.a].add(lk.b)
            out.switch_links[lk.b].add(lk.a)
            if lk.gbps is not None:
                out.rated.append(("switch", lk))
            continue
        for me, my_port, peer in ((lk.a, lk.a_port, lk.b), (lk.b, lk.b_port, lk.a)):
            if me in host_of:  # a CA cabled to another CA (back to back) has no switch
                to_switch = dev[peer].kind == "switch"
                out.host_ports[me].append((my_port, peer if to_switch else None, lk))
                if lk.gbps is not None and to_switch:
                    out.rated.append(("host", lk))
    return out


def _host_hcas(host_of: Mapping[str, tuple[str, str | None]], cables: _Cables,
               rail_map: RailMap) -> dict[str, tuple[Hca, ...]]:
    """Each host's cabled HCA ports in natural name order; a CA with two cabled ports (or two
    devices of one name, as the -p form lists a dual-port HCA) gives ``<hca>/<port>`` names."""
    raw: dict[str, list[tuple[str, str, int, str, float | None]]] = defaultdict(list)
    for g, (host, hca) in host_of.items():
        for port, sw, lk in sorted(cables.host_ports.get(g, ()), key=lambda t: t[0]):
            if sw is not None:
                raw[host].append((hca or g, g, port, sw, lk.gbps))
    hosts: dict[str, tuple[Hca, ...]] = {}
    for host in sorted(raw, key=natural_key):
        entries = sorted(raw[host], key=lambda e: (natural_key(e[0]), e[2]))
        seen = Counter(e[0] for e in entries)
        table = rail_map.get(host) or rail_map.get("*") or {}
        hosts[host] = tuple(Hca(host, n if seen[n] == 1 else f"{n}/{p}", g, p, sw, rate, table.get(n, i))
                            for i, (n, g, p, sw, rate) in enumerate(entries))
    return hosts


def _rails(hosts: Mapping[str, tuple[Hca, ...]]) -> tuple[dict[str, int], bool]:
    """Leaf -> the rail most of its HCAs are on; rail-optimised when most multi-HCA hosts spread
    their HCAs over several leaves."""
    votes: dict[str, Counter[int]] = defaultdict(Counter)
    for hcas in hosts.values():
        for h in hcas:
            if h.switch is not None:
                votes[h.switch][h.rail] += 1
    leaf_rail = {sw: c.most_common(1)[0][0] for sw, c in votes.items()}
    multi = [hc for hc in hosts.values() if len(hc) > 1]
    spread = sum(1 for hc in multi if len({h.switch for h in hc}) > 1)
    return leaf_rail, bool(multi) and spread * 2 > len(multi)


def _switches(found: Discovery, label: Mapping[str, str], hosts: Mapping[str, tuple[Hca, ...]],
              level: Mapping[str, int], switch_links: Mapping[str, set[str]],
              leaf_rail: Mapping[str, int]) -> dict[str, SwitchInfo]:
    """Switch names: the description's own name when it is unique (and no host's), else ``ib-<guid>``."""
    proposed = {g: switch_name(label[g], g) for g, d in found.devices.items() if d.kind == "switch"}
    taken = Counter(n for n in proposed.values() if n)
    hosts_on: dict[str, list[str]] = defaultdict(list)
    for host, hcs in hosts.items():
        for sw in dict.fromkeys(h.switch for h in hcs if h.switch is not None):
            hosts_on[sw].append(host)
    switches: dict[str, SwitchInfo] = {}
    for g, name in proposed.items():
        if not name or taken[name] > 1 or name in hosts:
            name = f"ib-{g}"
        lvl = level.get(g)
        up = tuple(sorted(p for p in switch_links.get(g, ()) if lvl is not None and level.get(p) == lvl + 1))
        switches[g] = SwitchInfo(g, name, label[g], lvl, leaf_rail.get(g), tuple(hosts_on.get(g, ())), up)
    return switches


def _problems(found: Discovery, label: Mapping[str, str], host_of: Mapping[str, tuple[str, str | None]],
              cables: _Cables, hosts: Mapping[str, tuple[Hca, ...]], switches: Mapping[str, SwitchInfo],
              leaf_rail: Mapping[str, int], rates: Mapping[str, Counter[float]],
              unknown: list[str]) -> tuple[Problem, ...]:
    """Everything that could not be classified, by kind; ``leaf_rail`` empty unless rail-optimised."""
    unattached = [f"{host_of[g][0]} {host_of[g][1] or g}" for g in host_of
                  if not any(sw for _, sw, _ in cables.host_ports.get(g, ()))]
    off_rail = []
    for host, hcs in hosts.items():
        wrong = [f"{h.name} (rail {h.rail}) on a rail-{leaf_rail[h.switch]} leaf"
                 for h in hcs if h.switch in leaf_rail and leaf_rail[h.switch] != h.rail]
        if wrong:
            off_rail.append(f"{host}: " + ", ".join(wrong))
    counts = Counter(len(hc) for hc in hosts.values())
    usual = counts.most_common(1)[0][0] if counts else 0
    short = [f"{host}: {len(hc)} HCA(s), most hosts have {usual}" for host, hc in hosts.items() if len(hc) != usual]
    lonely = [f"{s.name} {label[g]!r}" for g, s in switches.items() if s.level is None]
    upper = [f"{host} on {switches[h.switch].name} (level {switches[h.switch].level})"
             for host, hcs in hosts.items() for h in hcs if (switches[h.switch].level or 1) > 1]
    modal = {k: c.most_common(1)[0][0] if c else 0.0 for k, c in rates.items()}
    slow = [f"{_end(label, lk.a, lk.a_port)} - {_end(label, lk.b, lk.b_port)}: "
            f"{lk.width} {lk.speed} = {lk.gbps:g} Gb/s, most {kind} links {modal[kind]:g} Gb/s (line {lk.line})"
            for kind, lk in cables.rated if lk.gbps is not None and lk.gbps < modal[kind]]
    skipped = [f"line {n}" for n in found.skipped]
    return tuple(Problem(k, tuple(v), found.skipped_count if v is skipped else len(v)) for k, v in (
        ("unknown devices", unknown), ("switches with no hosts", lonely), ("hosts with an HCA off-rail", off_rail),
        ("hosts with an unusual HCA count", short), ("host HCAs not cabled to a switch", unattached),
        ("hosts cabled to an upper-level switch", upper),
        ("links slower than the rest", slow), ("lines not understood", skipped)) if v)


def _end(label: Mapping[str, str], guid: str, port: int) -> str:
    return f"{label.get(guid) or guid}[{port}]"
