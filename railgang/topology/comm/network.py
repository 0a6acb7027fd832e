"""Links, paths and fair sharing: how much bandwidth each collective gets from the fabric.

Links are directed (InfiniBand is full duplex): a NIC's send and receive side, and each switch's
uplink and downlink. Capacities come from the hardware (``CommParams``): a NIC port carries its
payload rate; a switch's uplink carries what its ports below carry, divided by that level's
oversubscription; a switch with a ``LinkSpeed`` in topology.conf runs its ports (and so the
NIC cables into a leaf) at that rate, never above the NIC's (``CommParams.port_gbps``); a degraded
port or switch (``LinkHealth``) scales the links it touches.

On a rail-optimised fabric a leaf is a group of rail switches (NIC k of every node on rail
switch k); traffic between different rails must climb to a spine and come back down, unless
NCCL's PXN first moves it over NVLink to the local GPU on the destination's rail.

A collective is a set of *edges* (one per ring hop and channel, or one per point-to-point send),
each a list of links; every edge of a collective runs at the same rate (a ring goes as fast as
its slowest hop). Concurrent collectives share links max-min fairly per edge (progressive
filling), each capped by what the GPUs themselves can move.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from railgang.topology.comm.hardware import CommParams
from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth

__all__ = ["Flows", "LinkKey", "fair_rates", "link_capacity", "p2p_flows", "ring_flows"]

# ("nic", node, nic, "tx"|"rx") or ("up"|"down", switch, rail or -1)
LinkKey = tuple[str, str, int] | tuple[str, str, int, str]
Gpu = tuple[str, int]


@dataclass(frozen=True)
class Flows:
    """One collective's demand on the fabric.

    ``usage`` counts the edges crossing each link; ``cap`` bounds the per-edge rate (GB/s) by
    what the GPUs can move (NVLink, or the NIC for one channel); ``channels`` is how many
    parallel edges leave each node, so the collective's bus bandwidth is ``channels x rate``.
    ``nodes`` and ``ranks`` size the algorithm; ``max_switch_hops`` adds switch latency;
    ``pxn_hops`` counts ring hops NCCL's PXN moved onto the receiver's rail.
    """

    usage: Mapping[LinkKey, int]
    cap: float
    channels: int
    ranks: int
    nodes: int
    ranks_per_node: int
    max_switch_hops: int = 0
    pxn_hops: int = 0


def nic_of(fabric: Fabric, params: CommParams, gpu: Gpu) -> int:
    """The HCA GPU ``gpu`` sends through (GPUs share the node's NICs evenly)."""
    gpus = fabric.facts(gpu[0]).gpus
    return gpu[1] * min(params.nics_per_node, gpus) // gpus


def _switch_key(fabric: Fabric, node: str, nic: int) -> tuple[str, int]:
    return (fabric.leaf_of(node), nic if fabric.rail_optimised else -1)


def path_links(fabric: Fabric, a: str, nic_a: int, b: str, nic_b: int) -> tuple[list[LinkKey], int]:
    """Links from node ``a``'s NIC ``nic_a`` to node ``b``'s NIC ``nic_b``, and switches crossed.

    Besides the directed links, every switch crossed appears as ``("sw", name, rail)``: it has
    no capacity of its own, but a degraded switch caps each flow through it at its port rate.
    """
    links: list[LinkKey] = [("nic", a, nic_a, "tx")]
    start, end = _switch_key(fabric, a, nic_a), _switch_key(fabric, b, nic_b)
    crossed: list[str] = [start[0]]
    if start != end:
        chain_a, chain_b = fabric.ancestors(a), fabric.ancestors(b)
        depth_b = {s: j for j, s in enumerate(chain_b)}
        i = j = len(chain_a)
        for k, sw in enumerate(chain_a):
            if sw in depth_b and (k > 0 or start[0] != end[0] or start[1] == end[1]):
                i, j = k, depth_b[sw]
                break
        if i == 0:  # two rails of one leaf: up to the leaf's parent and back
            i = j = min(1, len(chain_a) - 1, len(chain_b) - 1)
        links.append(("up", start[0], start[1]))
        links.extend(("up", sw, -1) for sw in chain_a[1:i])
        links.append(("down", end[0], end[1]))
        links.extend(("down", sw, -1) for sw in chain_b[1:j])
        crossed += [*chain_a[1:i + 1], *reversed(chain_b[1:j]), end[0]]
    links.extend(("sw", sw, -1) for sw in dict.fromkeys(crossed))
    links.append(("nic", b, nic_b, "rx"))
    return links, len(crossed)


def link_capacity(fabric: Fabric, params: CommParams, link: LinkKey, health: LinkHealth | None) -> float:
    """Payload capacity of ``link`` in GB/s, after oversubscription and link health."""
    if link[0] == "sw":
        return float("inf")  # switching fabric: only its ports (the other links) limit
    if link[0] == "nic":
        factor = health.port_factor(link[1], link[2]) if health is not None else 1.0
        # the HCA's cable ends in a port of its leaf: it runs at the slower of the two
        return params.port_gbps(fabric.link_speed.get(fabric.leaf_of(link[1]))) * factor
    switch, rail = link[1], link[2]
    # topology.conf's LinkSpeed (else the NIC's rate) prices each port's share; the uplink's cable
    # ends in a port of the parent too and trains to the slower of the two
    up = fabric.parent(switch)
    nic = min(params.port_gbps(fabric.link_speed.get(switch)),
              params.port_gbps(fabric.link_speed.get(up)) if up else float("inf"))
    height = fabric.height(switch)
    below = len(fabric.nodes_under(switch))
    ports_per_node = 1 if rail >= 0 else params.nics_per_node
    cap = below * ports_per_node * nic
    for level in range(height):
        cap /= params.oversub(level)
    if health is not None and health.switches:
        parent = fabric.parent(switch)
        factor = min(health.switches.get(switch, 1.0),
                     health.switches.get(parent, 1.0) if parent else 1.0)
        cap *= factor
    return cap


def _intra_cap(fabric: Fabric, params: CommParams, node: str) -> float:
    return params.gpu.nvlink_gbps if fabric.facts(node).nvlink else params.gpu.pcie_gbps


def ring_flows(fabric: Fabric, gpus: Sequence[Gpu], params: CommParams) -> Flows:
    """The channels NCCL builds for a ring over ``gpus``, as edges on the fabric.

    Nodes in topology order; each node contributes one channel per distinct NIC its GPUs use,
    and a ring has as many channels as its poorest node. Channel k leaves every node on the
    k-th rail of that node's list, rails shared by all nodes first, so nodes with the same
    GPU indices stay rail-aligned.
    """
    by_node: dict[str, list[int]] = {}
    for node, g in gpus:
        by_node.setdefault(node, []).append(g)
    nodes = sorted(by_node, key=fabric.index)
    n = len(gpus)
    ppn = max(len(v) for v in by_node.values())
    intra = min(_intra_cap(fabric, params, nd) for nd in nodes)
    # A multi-node NVLink domain is one NVLink island: no network inside it.
    domains = {fabric.domain_of(nd) for nd in nodes}
    if len(domains) == 1:
        return Flows({}, intra, 1, n, 1, n)
    nics = {nd: sorted({nic_of(fabric, params, (nd, g)) for g in by_node[nd]}) for nd in nodes}
    common = set.intersection(*(set(v) for v in nics.values()))
    order = {nd: sorted(common) + [x for x in nics[nd] if x not in common] for nd in nodes}
    channels = min(len(v) for v in order.values())
    usage: dict[LinkKey, int] = {}
    hops_max = pxn_hops = 0
    ring = list(nodes)
    m = len(ring)
    for k in range(channels):
        for i in range(m):
            a, b = ring[i], ring[(i + 1) % m]
            if fabric.domain_of(a) == fabric.domain_of(b):
                continue
            ra, rb = order[a][k], order[b][k]
            if ra != rb and params.pxn and rb in nics[a]:
                ra = rb  # PXN: NVLink to the local GPU on rail rb, then out of its NIC
                pxn_hops += 1
            links, hops = path_links(fabric, a, ra, b, rb)
            hops_max = max(hops_max, hops)
            for link in links:
                usage[link] = usage.get(link, 0) + 1
    # Bus bandwidth is bounded by NVLink (each GPU forwards every byte once per direction):
    # channels x rate <= intra, and one channel cannot beat one NIC (the NIC link caps it).
    cap = intra / channels if ppn > 1 else float("inf")
    return Flows(usage, cap, channels, n, m, ppn, hops_max, pxn_hops)


def p2p_flows(fabric: Fabric, src: Gpu, dst: Gpu, params: CommParams) -> Flows:
    """One point-to-point send (a pipeline stage boundary): NVLink inside a domain, else the
    sender's NIC (or, with PXN, the NIC on the receiver's rail) across the fabric."""
    if fabric.domain_of(src[0]) == fabric.domain_of(dst[0]):
        return Flows({}, _intra_cap(fabric, params, src[0]), 1, 2, 1, 2)
    ra, rb = nic_of(fabric, params, src), nic_of(fabric, params, dst)
    if ra != rb and params.pxn:
        ra = rb  # any local GPU may relay over NVLink; the node has every rail
    links, hops = path_links(fabric, src[0], ra, dst[0], rb)
    return Flows({link: 1 for link in links}, float("inf"), 1, 2, 2, 1, hops)


def fair_rates(flows: Sequence[Flows], capacity: Mapping[LinkKey, float]) -> list[float]:
    """Per-edge rate (GB/s) of each collective under max-min fair sharing of every link.

    Progressive filling: all unfrozen collectives' edges rise together; a collective freezes when
    a link it crosses fills up or it reaches its own cap.
    """
    rates = [0.0] * len(flows)
    active = {i for i, f in enumerate(flows)}
    used: dict[LinkKey, float] = {}
    links_of = [f.usage for f in flows]
    while active:
        demand: dict[LinkKey, int] = {}
        for i in active:
            for link, u in links_of[i].items():
                demand[link] = demand.get(link, 0) + u
        level = rates[next(iter(active))]
        step = min((flows[i].cap - level for i in active), default=float("inf"))
        for link, d in demand.items():
            step = min(step, (capacity[link] - used.get(link, 0.0)) / d)
        if step == float("inf"):  # nothing bounds them (NVLink-free, network-free): unlimited
            for i in active:
                rates[i] = float("inf")
            break
        step = max(step, 0.0)
        level += step
        for i in active:
            rates[i] = level
        for link, d in demand.items():
            used[link] = used.get(link, 0.0) + d * step
        full = {link for link in demand if used[link] >= capacity[link] * (1 - 1e-9)}
        frozen = {i for i in active
                  if rates[i] >= flows[i].cap * (1 - 1e-9) or any(link in full for link in links_of[i])}
        if not frozen:  # numerical safety: never loop forever
            frozen = set(active)
        active -= frozen
    return rates
