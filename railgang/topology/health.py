"""Link health as placement sees it: effective-bandwidth factors per HCA port and per switch, and
the quarantine set (R-T2, R-T3).

``LinkHealth`` is the immutable summary the placement engine and the communication model read; it
is built by ``railgang.topology.linkstate.assess`` from counter rates, or by hand in tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only named: importing the fabric (networkx) is the caller's business
    from railgang.topology.fabric import Fabric

__all__ = ["LinkHealth"]


def _empty() -> Mapping[str, float]:
    return MappingProxyType({})


@dataclass(frozen=True)
class LinkHealth:
    """Effective/nominal bandwidth factors in [0, 1] and quarantined nodes with their reason.

    ``hca`` maps (node, rail) to the factor of that node's port on that rail; ``switches`` maps a
    switch name to the factor of every path through it (a lame spine slows all cross-leaf
    traffic). Anything absent is healthy (1.0). ``quarantined`` maps node -> reason.
    ``observed`` names the nodes whose links a live collector watches and has enough clean or
    bad intervals on to vouch for (``linkstate.LinkTracker``): a node there and not quarantined
    has healthy links now, so a quarantine left from earlier (a Slurm node tag) may be lifted.
    """

    hca: Mapping[tuple[str, int], float] = field(default_factory=lambda: MappingProxyType({}))
    switches: Mapping[str, float] = field(default_factory=_empty)
    quarantined: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    observed: frozenset[str] = frozenset()

    def port_factor(self, node: str, rail: int) -> float:
        """Factor of the HCA port of ``node`` on ``rail``."""
        return self.hca.get((node, rail), 1.0)

    def path_factor(self, fabric: Fabric, a: tuple[str, int], b: tuple[str, int]) -> float:
        """Worst factor along the path between GPU ``a`` and GPU ``b`` (1.0 inside a node)."""
        if a[0] == b[0]:
            return 1.0
        worst = min(self.port_factor(a[0], a[1]), self.port_factor(b[0], b[1]))
        if self.switches:
            for sw in fabric.path_switches(a[0], b[0]):
                worst = min(worst, self.switches.get(sw, 1.0))
        return worst

    def is_quarantined(self, node: str) -> bool:
        """True if ``node`` should not run communication-heavy jobs."""
        return node in self.quarantined

    @property
    def healthy(self) -> bool:
        """True when nothing is degraded or quarantined."""
        return not self.quarantined and all(v >= 1.0 for v in self.hca.values()) and all(
            v >= 1.0 for v in self.switches.values())
