"""A fake InfiniBand fabric for tests and demos: writes sysfs-like counter trees per node and lets
tests inject errors, resets, wraps, garbage and degraded ports on chosen links.

Layout written: ``<root>/<node>/class/infiniband/mlx5_<rail>/ports/1/{counters/*,rate,state,phys_state}``,
so ``read_sysfs(fake.sysfs_root(node), node, t)`` reads it exactly like a real node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from railgang.topology.fabric import Fabric

__all__ = ["FakeIBFabric", "Injection"]

_ERRORS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
           "port_rcv_remote_physical_errors", "port_xmit_discards", "local_link_integrity_errors",
           "excessive_buffer_overrun_errors", "port_xmit_wait")


@dataclass
class Injection:
    """Per-second error increments and port state forced on one link."""

    per_s: dict[str, float] = field(default_factory=dict)
    rate_text: str | None = None
    state: str | None = None
    phys_state: str | None = None


class FakeIBFabric:
    """Counter state of every HCA port of ``fabric``, advanced with ``step`` and written to disk."""

    def __init__(self, root: Path, fabric: Fabric, *, rate_text: str = "400 Gb/sec (4X NDR)",
                 data_width: int = 64) -> None:
        self.root = root
        self.fabric = fabric
        self.rate_text = rate_text
        self.data_width = data_width
        self.time = 0.0
        self.values: dict[tuple[str, int], dict[str, int]] = {}
        self.injections: dict[tuple[str, int], Injection] = {}
        self.garbage: dict[tuple[str, int, str], str] = {}
        for node in fabric.nodes:
            for rail in range(fabric.facts(node).gpus):
                self.values[(node, rail)] = dict.fromkeys(
                    (*_ERRORS, "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"), 0)
        self.write()

    def sysfs_root(self, node: str) -> Path:
        """The ``/sys/class/infiniband`` of ``node``."""
        return self.root / node / "class" / "infiniband"

    def inject(self, node: str, rail: int, **per_s: float) -> None:
        """Add error increments per second on ``node``'s rail ``rail`` (e.g. ``symbol_error=5``)."""
        self.injections.setdefault((node, rail), Injection()).per_s.update(per_s)

    def degrade(self, node: str, rail: int, *, rate_text: str | None = None, state: str | None = None,
                phys_state: str | None = None) -> None:
        """Force a lower trained rate (``"200 Gb/sec (4X HDR)"``) or a port state (``"1: DOWN"``)."""
        inj = self.injections.setdefault((node, rail), Injection())
        inj.rate_text, inj.state, inj.phys_state = rate_text, state, phys_state

    def set_counter(self, node: str, rail: int, name: str, value: int) -> None:
        """Set a raw value (to stage wraps and resets)."""
        self.values[(node, rail)][name] = value

    def corrupt(self, node: str, rail: int, name: str, text: str) -> None:
        """Write ``text`` instead of the counter's value on the next ``write``."""
        self.garbage[(node, rail, name)] = text

    def step(self, seconds: float, traffic_gbps: float = 10.0) -> None:
        """Advance time: data counters by ``traffic_gbps`` each way (in 4-byte words), errors by injections."""
        self.time += seconds
        words = int(traffic_gbps * 1e9 * seconds / 4)
        mask = (1 << self.data_width) - 1
        for key, counters in self.values.items():
            for name in ("port_xmit_data", "port_rcv_data"):
                counters[name] = (counters[name] + words) & mask
            for name in ("port_xmit_packets", "port_rcv_packets"):
                counters[name] = (counters[name] + words // 1024) & mask
            inj = self.injections.get(key)
            if inj is not None:
                for name, rate in inj.per_s.items():
                    counters[name] = counters.get(name, 0) + int(rate * seconds)
        self.write()

    def write(self) -> None:
        """Write every port's files."""
        for (node, rail), counters in self.values.items():
            port = self.sysfs_root(node) / f"mlx5_{rail}" / "ports" / "1"
            cdir = port / "counters"
            cdir.mkdir(parents=True, exist_ok=True)
            for name, value in counters.items():
                text = self.garbage.get((node, rail, name), str(value))
                (cdir / name).write_text(text + "\n")
            inj = self.injections.get((node, rail), Injection())
            (port / "rate").write_text((inj.rate_text or self.rate_text) + "\n")
            (port / "state").write_text((inj.state or "4: ACTIVE") + "\n")
            (port / "phys_state").write_text((inj.phys_state or "5: LinkUp") + "\n")
