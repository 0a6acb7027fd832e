"""A fake InfiniBand fabric for tests and demos: writes sysfs-like counter trees per node and lets
tests inject errors, resets, wraps, garbage and degraded ports on chosen links.

Layout written: ``<root>/<node>/class/infiniband/mlx5_<rail>/ports/1/{counters/*,rate,state,phys_state}``,
so ``read_sysfs(fake.sysfs_root(node), node, t)`` reads it exactly like a real node, and
``exporter_text(node)`` renders the same counters as node_exporter's infiniband collector
publishes them (``node_infiniband_*``), for a scrape over real HTTP in tests and benchmarks.

Faults: ``inject`` (a steady error rate: a lame cable), ``burst`` (one-off errors on the next
step: one noisy interval), ``flap`` (the port goes down and up every step: link_downed and
recoveries count, the state toggles), ``reset_counters`` (a reboot or ``perfquery -R``),
``degrade`` (trained below the nominal rate, or down) and ``repair`` (all faults cleared).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from railgang.topology.fabric import Fabric

__all__ = ["FakeIBFabric", "Injection"]

# node_exporter's infiniband collector: its metric name for each sysfs counter (bytes for data)
_EXPORTER_NAMES = {
    "symbol_error": "symbol_error_total", "link_error_recovery": "link_error_recovery_total",
    "link_downed": "link_downed_total", "port_rcv_errors": "port_errors_received_total",
    "port_rcv_remote_physical_errors": "port_receive_remote_physical_errors_total",
    "port_xmit_discards": "port_discards_transmitted_total",
    "local_link_integrity_errors": "local_link_integrity_errors_total",
    "excessive_buffer_overrun_errors": "excessive_buffer_overrun_errors_total",
    "port_xmit_wait": "port_transmit_wait_total", "port_xmit_data": "port_data_transmitted_bytes_total",
    "port_rcv_data": "port_data_received_bytes_total", "port_xmit_packets": "port_packets_transmitted_total",
    "port_rcv_packets": "port_packets_received_total",
}

_ERRORS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
           "port_rcv_remote_physical_errors", "port_xmit_discards", "local_link_integrity_errors",
           "excessive_buffer_overrun_errors", "port_xmit_wait")


@dataclass
class Injection:
    """Per-second error increments and port state forced on one link."""

    per_s: dict[str, float] = field(default_factory=dict)
    once: dict[str, int] = field(default_factory=dict)  # added on the next step only
    flapping: bool = False
    rate_text: str | None = None
    state: str | None = None
    phys_state: str | None = None


class FakeIBFabric:
    """Counter state of every HCA port of ``fabric``, advanced with ``step`` and written to disk."""

    def __init__(self, root: Path | None, fabric: Fabric, *, rate_text: str = "400 Gb/sec (4X NDR)",
                 data_width: int = 64) -> None:
        self.root = root
        self.fabric = fabric
        self.rate_text = rate_text
        self.data_width = data_width
        self.time = 0.0
        self.steps = 0
        self.values: dict[tuple[str, int], dict[str, int]] = {}
        self.injections: dict[tuple[str, int], Injection] = {}
        self.garbage: dict[tuple[str, int, str], str] = {}
        self._written: dict[Path, str] = {}  # what each file holds (only changes are written)
        self._made: set[tuple[str, int]] = set()
        for node in fabric.nodes:
            for rail in range(fabric.facts(node).gpus):
                self.values[(node, rail)] = dict.fromkeys(
                    (*_ERRORS, "port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"), 0)
        self.write()

    def sysfs_root(self, node: str) -> Path:
        """The ``/sys/class/infiniband`` of ``node``."""
        if self.root is None:
            raise ValueError("this fake fabric writes no files (root=None)")
        return self.root / node / "class" / "infiniband"

    def inject(self, node: str, rail: int, **per_s: float) -> None:
        """Add error increments per second on ``node``'s rail ``rail`` (e.g. ``symbol_error=5``)."""
        self.injections.setdefault((node, rail), Injection()).per_s.update(per_s)

    def degrade(self, node: str, rail: int, *, rate_text: str | None = None, state: str | None = None,
                phys_state: str | None = None) -> None:
        """Force a lower trained rate (``"200 Gb/sec (4X HDR)"``) or a port state (``"1: DOWN"``)."""
        inj = self.injections.setdefault((node, rail), Injection())
        inj.rate_text, inj.state, inj.phys_state = rate_text, state, phys_state

    def burst(self, node: str, rail: int, **counts: int) -> None:
        """Add ``counts`` (e.g. ``symbol_error=500``) once, on the next ``step``: one noisy interval."""
        once = self.injections.setdefault((node, rail), Injection()).once
        for name, n in counts.items():
            once[name] = once.get(name, 0) + n

    def flap(self, node: str, rail: int, on: bool = True) -> None:
        """Make the port go down and come back every ``step`` (link_downed and link recoveries
        count up, the state reads DOWN on every other write) until ``flap(..., on=False)``."""
        self.injections.setdefault((node, rail), Injection()).flapping = on

    def reset_counters(self, node: str, rail: int | None = None) -> None:
        """Zero every counter of the port (or of every port of ``node``): a reboot, a driver reload."""
        for (n, r), counters in self.values.items():
            if n == node and (rail is None or r == rail):
                for name in counters:
                    counters[name] = 0
        self.write()

    def repair(self, node: str, rail: int) -> None:
        """Clear every fault injected on the port (counters keep their values, as after a cable swap)."""
        self.injections.pop((node, rail), None)
        self.write()

    def set_counter(self, node: str, rail: int, name: str, value: int) -> None:
        """Set a raw value (to stage wraps and resets)."""
        self.values[(node, rail)][name] = value

    def corrupt(self, node: str, rail: int, name: str, text: str) -> None:
        """Write ``text`` instead of the counter's value on the next ``write``."""
        self.garbage[(node, rail, name)] = text

    def step(self, seconds: float, traffic_gbps: float = 10.0) -> None:
        """Advance time: data counters by ``traffic_gbps`` each way (in 4-byte words), errors by injections."""
        self.time += seconds
        self.steps += 1
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
                for name, n in inj.once.items():
                    counters[name] = counters.get(name, 0) + n
                inj.once.clear()
                if inj.flapping and self.steps % 2:  # went down (and came back) this step
                    counters["link_downed"] += 1
                    counters["link_error_recovery"] += 1
        self.write()

    def _port_state(self, key: tuple[str, int]) -> tuple[str, str, str]:
        """(rate, state, phys_state) texts as the port's sysfs files read now."""
        inj = self.injections.get(key, Injection())
        if inj.flapping and self.steps % 2:
            return inj.rate_text or self.rate_text, "1: DOWN", "2: Polling"
        return (inj.rate_text or self.rate_text, inj.state or "4: ACTIVE",
                inj.phys_state or "5: LinkUp")

    def exporter_text(self, node: str) -> str:
        """The node's ports as node_exporter's infiniband collector publishes them."""
        lines: list[str] = []
        for (n, rail), counters in self.values.items():
            if n != node:
                continue
            labels = f'{{device="mlx5_{rail}",port="1"}}'
            for name, value in counters.items():
                metric = _EXPORTER_NAMES.get(name)
                if metric is None:
                    continue
                if name in ("port_xmit_data", "port_rcv_data"):
                    value *= 4  # the exporter publishes bytes, sysfs counts 4-byte words
                lines.append(f"node_infiniband_{metric}{labels} {self.garbage.get((n, rail, name), value)}")
            rate, state, phys = self._port_state((n, rail))
            gbits = float(rate.split()[0]) if rate.split() and rate.split()[0].replace(".", "").isdigit() else 0.0
            lines.append(f"node_infiniband_rate_bytes_per_second{labels} {gbits * 1e9 / 8:.0f}")
            lines.append(f"node_infiniband_state_id{labels} {state.split(':')[0]}")
            lines.append(f"node_infiniband_physical_state_id{labels} {phys.split(':')[0]}")
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        """Write every port's files that changed (nothing without a ``root``: exporter text only).

        Each file is replaced whole, so a reader never sees half a value (as with the kernel's
        sysfs files, which are generated on read)."""
        if self.root is None:
            return
        for (node, rail), counters in self.values.items():
            port = self.sysfs_root(node) / f"mlx5_{rail}" / "ports" / "1"
            cdir = port / "counters"
            if (node, rail) not in self._made:
                cdir.mkdir(parents=True, exist_ok=True)
                self._made.add((node, rail))
            rate, state, phys = self._port_state((node, rail))
            files = [(cdir / name, self.garbage.get((node, rail, name), str(value)))
                     for name, value in counters.items()]
            files += [(port / "rate", rate), (port / "state", state), (port / "phys_state", phys)]
            for path, text in files:
                if self._written.get(path) == text:
                    continue
                tmp = port / f".{path.name}.tmp"
                tmp.write_text(text + "\n")
                os.replace(tmp, path)
                self._written[path] = text
