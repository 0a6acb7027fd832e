"""Classify links from counter rates and build the ``LinkHealth`` placement reads (R-T2, R-T3).

A link that is up but keeps counting symbol errors, link recoveries or receive errors is *lame*:
binary health checks stay green while collectives crawl, so it counts at a reduced effective
bandwidth and its nodes are quarantined for communication-heavy jobs. Discards and transmit wait
mean *congested*: slower, but not broken, so no quarantine. A port that is down, or trained to a
lower rate than the fabric's nominal one, is lame at the bandwidth it actually has.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from railgang.topology.counters import ERROR_COUNTERS, PortKey, PortRates
from railgang.topology.fabric import Fabric
from railgang.topology.health import LinkHealth

__all__ = [
    "Assessment",
    "LinkState",
    "QuarantineEntry",
    "Thresholds",
    "assess",
    "classify",
    "quarantine_entries",
    "rail_from_device",
]

Status = Literal["healthy", "congested", "lame"]


@dataclass(frozen=True)
class Thresholds:
    """When a port counts as lame or congested, and what bandwidth it then has."""

    nominal_gbps: float = 50.0            # expected per-port bandwidth (4X NDR = 50 GB/s)
    lame_errors_per_s: float = 0.01       # any physical error counter above this (≈1 per 100 s)
    lame_factor: float = 0.5              # effective share of an erroring link (retransmits, replays)
    min_rate_fraction: float = 0.99       # trained below this share of nominal -> lame
    congested_discards_per_s: float = 1.0
    congested_wait_per_s: float = 1e6     # port_xmit_wait ticks per second
    wait_ticks_per_s: float = 1.5e8       # ticks in a second of full stall (for the congestion factor)
    min_congested_factor: float = 0.3


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class LinkState:
    """Verdict on one port: status, effective/nominal factor, effective GB/s and the evidence."""

    key: PortKey
    status: Status
    factor: float
    effective_gbps: float
    reasons: tuple[str, ...] = ()


def classify(rates: PortRates, th: Thresholds = DEFAULT_THRESHOLDS) -> LinkState:
    """Healthy, congested or lame, from one interval's rates."""
    reasons: list[str] = []
    factor = 1.0
    status: Status = "healthy"
    nominal = th.nominal_gbps
    if (rates.state and rates.state.upper() != "ACTIVE") or (rates.phys_state and rates.phys_state != "LinkUp"):
        reasons.append(f"port {rates.state or '?'}/{rates.phys_state or '?'}")
        return LinkState(rates.key, "lame", 0.0, 0.0, tuple(reasons))
    for name in ERROR_COUNTERS:
        r = rates.rates.get(name, 0.0)
        limit = 0.0 if name == "link_downed" else th.lame_errors_per_s
        if r > limit:
            reasons.append(f"{name} {r:.3g}/s")
    if reasons:
        status, factor = "lame", th.lame_factor
    if rates.rate_gbps is not None and rates.rate_gbps < nominal * th.min_rate_fraction:
        reasons.append(f"trained at {rates.rate_gbps:g} GB/s of {nominal:g}")
        status, factor = "lame", min(factor, rates.rate_gbps / nominal)
    if status == "healthy":
        discards = rates.rates.get("port_xmit_discards", 0.0)
        wait = rates.rates.get("port_xmit_wait", 0.0)
        if discards > th.congested_discards_per_s or wait > th.congested_wait_per_s:
            status = "congested"
            factor = max(th.min_congested_factor, 1.0 - wait / th.wait_ticks_per_s)
            reasons.append(f"xmit_discards {discards:.3g}/s, xmit_wait {wait:.3g}/s")
    return LinkState(rates.key, status, factor, nominal * factor, tuple(reasons))


_TRAILING = re.compile(r"(\d+)$")


def rail_from_device(key: PortKey) -> int | None:
    """Rail of an HCA from its device name: ``mlx5_3`` -> 3 (GPU k sits next to HCA k)."""
    m = _TRAILING.search(key.device)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class Assessment:
    """Per-port verdicts, the resulting ``LinkHealth``, and samples that could not be used."""

    states: tuple[LinkState, ...]
    health: LinkHealth
    warnings: tuple[str, ...]


# (port, factor it counts at, why it quarantines its node(s) or None)
_Verdict = tuple[PortKey, float, str | None]


def _fold(
    fabric: Fabric,
    verdicts: Iterable[_Verdict],
    rail_of: Callable[[PortKey], int | None],
    observed: frozenset[str] = frozenset(),
) -> tuple[LinkHealth, list[str]]:
    """Port verdicts -> HCA and switch factors and the quarantine set (see :func:`assess`)."""
    hca: dict[tuple[str, int], float] = {}
    switches: dict[str, float] = {}
    quarantined: dict[str, str] = {}
    warnings: list[str] = []
    switch_names = set(fabric.switches)
    for key, factor, why in verdicts:
        host = key.host
        if host in fabric:
            rail = rail_of(key)
            if rail is None:
                warnings.append(f"{host} {key.device}: cannot tell its rail, ignored")
                continue
            hca[(host, rail)] = min(hca.get((host, rail), 1.0), factor)
            if why is not None:
                quarantined.setdefault(host, f"lame link {key.device} port {key.port}: {why}")
        elif host in switch_names:
            switches[host] = min(switches.get(host, 1.0), factor)
            if why is not None and fabric.height(host) == 1:
                for node in fabric.direct_nodes(host):
                    quarantined.setdefault(node, f"behind lame switch {host} port {key.port}: {why}")
        else:
            warnings.append(f"unknown host {host!r} in counters, skipped")
    health = LinkHealth(MappingProxyType(hca), MappingProxyType(switches),
                        MappingProxyType(quarantined), observed)
    return health, warnings


def assess(
    fabric: Fabric,
    rates: Iterable[PortRates],
    th: Thresholds = DEFAULT_THRESHOLDS,
    rail_of: Callable[[PortKey], int | None] = rail_from_device,
) -> Assessment:
    """Fold port verdicts of one interval into HCA and switch factors and the quarantine set.

    Host ports (``key.host`` a node) set ``hca[(node, rail)]``; switch ports (``key.host`` a
    switch) set the switch factor. A lame HCA quarantines its node; a lame port on a *leaf*
    quarantines every node on that leaf. Higher switches only lower the factor of paths through
    them (quarantining a whole spine's nodes would strand far more than it protects). One
    interval, no memory: the daemon's collector uses :class:`LinkTracker` instead.
    """
    states = [classify(r, th) for r in rates]
    health, warnings = _fold(fabric, ((st.key, st.factor, "; ".join(st.reasons) if st.status == "lame"
                                       else None) for st in states), rail_of)
    return Assessment(tuple(states), health, tuple(warnings))


@dataclass(frozen=True)
class QuarantineEntry:
    """A node to drain or tag, with a reason short enough for ``scontrol update Reason=``."""

    node: str
    reason: str
    feature: str = "rg_lame"

    @property
    def slurm_reason(self) -> str:
        return ("railgang: " + self.reason)[:120]


def quarantine_entries(health: LinkHealth) -> tuple[QuarantineEntry, ...]:
    """The quarantine set as sorted entries for the daemon to act on."""
    return tuple(QuarantineEntry(n, r) for n, r in sorted(health.quarantined.items()))
