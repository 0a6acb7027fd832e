"""InfiniBand port counters: readers for sysfs, ``perfquery`` / ``perfquery -x`` text and Prometheus
node_exporter text, and rates from two samples (R-T2).

Every reader returns ``PortSample``s with counters under their sysfs names
(``port_xmit_data``, ``symbol_error``, …) and a ``data_scale`` saying how many bytes one unit of the
data counters is: 4 for sysfs and perfquery (the IBA counts 4-byte words), 1 for node_exporter (which
already multiplied). Garbage never raises: an unreadable value is skipped and named in
``warnings``. Rates handle counters that wrap (32- or 64-bit) and counters that were reset.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from prometheus_client.parser import text_string_to_metric_families

from railgang.topology.files import InputProblem, open_input

__all__ = [
    "ERROR_COUNTERS",
    "PortKey",
    "PortRates",
    "PortSample",
    "parse_node_exporter",
    "parse_perfquery",
    "port_rates",
    "read_sysfs",
]

# Errors that make a link lame (physical layer) vs. those that signal congestion.
ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)
CONGESTION_COUNTERS = ("port_xmit_discards", "port_xmit_wait", "port_rcv_switch_relay_errors")
DATA_COUNTERS = ("port_xmit_data", "port_rcv_data")
# The IBA error and congestion counters stop at their maximum instead of wrapping (PortCounters,
# IBA 1.3 §16.1.3.5), so one that went down was reset (a reboot, a driver reload, `perfquery -R`
# after a repair), never wrapped: its new value is what accrued since the reset.
SATURATING = frozenset((*ERROR_COUNTERS, *CONGESTION_COUNTERS))

# Widths of the IBA PortCounters attribute (non-extended); the extended set is 64-bit throughout.
_WIDTH = {
    "symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16, "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4, "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16,
    "port_xmit_data": 32, "port_rcv_data": 32, "port_xmit_packets": 32, "port_rcv_packets": 32,
    "port_xmit_wait": 32,
}

_PERFQUERY = {
    "SymbolErrorCounter": "symbol_error", "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed", "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors", "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors", "VL15Dropped": "VL15_dropped",
    "PortXmitData": "port_xmit_data", "PortRcvData": "port_rcv_data", "PortXmitPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets", "PortXmitWait": "port_xmit_wait",
    "PortUnicastXmitPkts": "unicast_xmit_packets", "PortUnicastRcvPkts": "unicast_rcv_packets",
    "PortMulticastXmitPkts": "multicast_xmit_packets", "PortMulticastRcvPkts": "multicast_rcv_packets",
}

_EXPORTER = {
    "symbol_error_total": "symbol_error", "link_error_recovery_total": "link_error_recovery",
    "link_downed_total": "link_downed", "port_errors_received_total": "port_rcv_errors",
    "port_receive_remote_physical_errors_total": "port_rcv_remote_physical_errors",
    "port_receive_switch_relay_errors_total": "port_rcv_switch_relay_errors",
    "port_discards_transmitted_total": "port_xmit_discards",
    "port_constraint_errors_transmitted_total": "port_xmit_constraint_errors",
    "port_constraint_errors_received_total": "port_rcv_constraint_errors",
    "local_link_integrity_errors_total": "local_link_integrity_errors",
    "excessive_buffer_overrun_errors_total": "excessive_buffer_overrun_errors",
    "vl15_dropped_total": "VL15_dropped", "port_data_transmitted_bytes_total": "port_xmit_data",
    "port_data_received_bytes_total": "port_rcv_data", "port_packets_transmitted_total": "port_xmit_packets",
    "port_packets_received_total": "port_rcv_packets", "port_transmit_wait_total": "port_xmit_wait",
    "unicast_packets_transmitted_total": "unicast_xmit_packets",
    "unicast_packets_received_total": "unicast_rcv_packets",
}


@dataclass(frozen=True, order=True)
class PortKey:
    """One port: a host (node or switch name), a device (``mlx5_0``; a LID for perfquery) and a port."""

    host: str
    device: str
    port: int


@dataclass(frozen=True)
class PortSample:
    """Counter values of one port at one time (seconds, any monotonic origin)."""

    key: PortKey
    time: float
    counters: Mapping[str, int]
    widths: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    data_scale: int = 4                 # bytes per unit of port_*_data
    rate_gbps: float | None = None      # signalling rate, GB/s (e.g. 50.0 for 4X NDR)
    state: str | None = None            # "ACTIVE", "DOWN", …
    phys_state: str | None = None       # "LinkUp", "Polling", …
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class PortRates:
    """Per-second rates between two samples of one port, and what was odd about them."""

    key: PortKey
    interval_s: float
    rates: Mapping[str, float]
    xmit_gbps: float
    rcv_gbps: float
    rate_gbps: float | None
    state: str | None
    phys_state: str | None
    notes: tuple[str, ...] = ()


def _parse_int(text: str) -> int | None:
    text = text.strip()
    try:
        value = int(text, 0) if text.lower().startswith("0x") else int(float(text))
    except (ValueError, OverflowError):
        return None
    return value if value >= 0 else None


def _rate_gbps(text: str) -> float | None:
    """``"400 Gb/sec (4X NDR)"`` -> 50.0 GB/s."""
    m = re.match(r"\s*([0-9.]+)\s*Gb/sec", text)
    return float(m.group(1)) / 8 if m else None


def _state(text: str) -> str:
    """``"4: ACTIVE"`` -> ``"ACTIVE"``; ``"5: LinkUp"`` -> ``"LinkUp"``."""
    return text.split(":", 1)[-1].strip()


def read_sysfs(root: Path, host: str, time: float, *, data_width: int = 64) -> list[PortSample]:
    """Samples of every port under ``root`` (normally ``/sys/class/infiniband``).

    Layout: ``<root>/<dev>/ports/<p>/counters/<name>`` plus ``rate``, ``state``, ``phys_state``;
    ``port_*_data_64``/``port_*_packets_64`` win over the plain files. ``data_width`` is the width
    of the plain data/packet files (64 on HCAs with extended counters, 32 on old ones).
    """
    samples: list[PortSample] = []
    if not root.is_dir():
        return samples
    for dev in sorted(p for p in root.iterdir() if p.is_dir()):
        ports = dev / "ports"
        if not ports.is_dir():
            continue
        for pdir in sorted(p for p in ports.iterdir() if p.is_dir()):
            if not pdir.name.isdigit():
                continue
            counters: dict[str, int] = {}
            widths: dict[str, int] = {}
            warnings: list[str] = []
            cdir = pdir / "counters"
            files = sorted(cdir.iterdir()) if cdir.is_dir() else []
            for f in files:
                name = f.name
                base, wide = (name[:-3], True) if name.endswith("_64") else (name, False)
                try:
                    raw = _read_small(f)
                except OSError as exc:
                    warnings.append(f"{f}: unreadable ({exc.strerror})")
                    continue
                value = _parse_int(raw)
                if value is None:
                    warnings.append(f"{f}: not a counter value {raw.strip()[:30]!r}, skipped")
                    continue
                if wide or base not in counters:
                    counters[base] = value
                    data = base.endswith(("_data", "_packets"))
                    widths[base] = 64 if wide else (data_width if data else _WIDTH.get(base, 64))
            rate = _read_text(pdir / "rate")
            state = _read_text(pdir / "state")
            phys = _read_text(pdir / "phys_state")
            samples.append(PortSample(
                PortKey(host, dev.name, int(pdir.name)), time, MappingProxyType(counters),
                MappingProxyType(widths), 4, _rate_gbps(rate) if rate else None,
                _state(state) if state else None, _state(phys) if phys else None, tuple(warnings)))
    return samples


# A sysfs counter, rate or state file holds one short line; reading at most this much keeps a
# snapshot whose file is /dev/zero or a 50 MB paste from filling memory (issue 11 part 7): the
# value then fails to parse and is one warning.
_SMALL_FILE_BYTES = 4096


def _read_small(path: Path) -> str:
    try:  # regular files only (sysfs attributes are): a FIFO in a snapshot must not block
        fh = open_input(path, "counter file")
    except InputProblem as exc:
        raise OSError(errno.EINVAL, exc.message.split("; ")[0]) from exc
    with fh:
        return fh.read(_SMALL_FILE_BYTES).decode("utf-8", errors="replace")


def _read_text(path: Path) -> str | None:
    try:
        return _read_small(path).strip()
    except OSError:
        return None


_PQ_HEAD = re.compile(r"#\s*Port (extended )?counters:\s*Lid\s+(\d+)\s+port\s+(\d+)", re.I)
_PQ_LINE = re.compile(r"^([A-Za-z0-9]+):\.*\s*(\S*)\s*$")


def parse_perfquery(text: str, host: str, time: float) -> list[PortSample]:
    """Samples from ``perfquery`` or ``perfquery -x`` output (one block per ``# Port … counters`` header).

    ``host`` names what was queried (a switch name for switch ports); the LID becomes the device.
    """
    samples: list[PortSample] = []
    current: tuple[str, int, bool] | None = None
    counters: dict[str, int] = {}
    warnings: list[str] = []

    def flush() -> None:
        if current is not None:
            lid, port, extended = current
            widths = {k: 64 if extended else _WIDTH.get(k, 32) for k in counters}
            samples.append(PortSample(PortKey(host, f"lid{lid}", port), time, MappingProxyType(dict(counters)),
                                      MappingProxyType(widths), 4, warnings=tuple(warnings)))

    for number, line in enumerate(text.splitlines(), start=1):
        head = _PQ_HEAD.search(line)
        if head:
            flush()
            current = (head.group(2), int(head.group(3)), bool(head.group(1)))
            counters, warnings = {}, []
            continue
        m = _PQ_LINE.match(line.strip())
        if not m or current is None:
            if line.strip() and current is None:
                warnings.append(f"line {number}: before any '# Port counters' header, skipped")
            continue
        name = _PERFQUERY.get(m.group(1))
        if name is None:
            continue  # PortSelect, CounterSelect, vendor extras
        value = _parse_int(m.group(2))
        if value is None:
            warnings.append(f"line {number}: {m.group(1)} = {m.group(2)!r} is not a counter, skipped")
            continue
        counters[name] = value
    flush()
    return samples


_STATES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
_PHYS = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp",
         6: "LinkErrorRecovery", 7: "Phy Test"}
_IB_PREFIX = "node_infiniband_"


def _exporter_samples(text: str, warnings: list[str]) -> list[tuple[str, dict[str, str], float]]:
    """``(metric without the prefix, labels, value)`` of every ``node_infiniband_*`` sample, read
    by prometheus_client's text parser. Only those lines are parsed (a node_exporter page has
    thousands of others); a page the parser refuses is parsed line by line, so one broken line
    costs that line only (named in ``warnings``)."""
    lines = [(i, ln) for i, ln in enumerate(text.splitlines(), start=1)
             if ln.lstrip().startswith(_IB_PREFIX)]
    out: list[tuple[str, dict[str, str], float]] = []

    def take(chunk: str) -> None:
        for family in text_string_to_metric_families(chunk):
            for s in family.samples:
                out.append((s.name[len(_IB_PREFIX):], dict(s.labels), float(s.value)))

    try:
        take("\n".join(ln for _, ln in lines) + "\n")
        return out
    except ValueError:
        out.clear()
    for number, line in lines:
        try:
            take(line + "\n")
        except ValueError:
            warnings.append(f"line {number}: unreadable sample, skipped")
    return out


def parse_node_exporter(text: str, host: str, time: float) -> list[PortSample]:
    """Samples from Prometheus node_exporter text (``node_infiniband_*{device=…,port=…}``),
    parsed with prometheus_client's text parser.

    Data counters are already bytes there (``data_scale`` 1) and 64-bit.
    """
    ports: dict[tuple[str, int], dict[str, object]] = {}
    warnings: list[str] = []
    for metric, lab, raw in _exporter_samples(text, warnings):
        if "device" not in lab or not lab.get("port", "").isdigit():
            continue  # node_infiniband_info and friends
        entry = ports.setdefault((lab["device"], int(lab["port"])), {"counters": {}})
        value = _parse_int(repr(raw))
        if value is None:
            warnings.append(f"{metric}{{device={lab['device']},port={lab['port']}}} = {raw!r} "
                            "is not a counter, skipped")
            continue
        if metric == "rate_bytes_per_second":
            entry["rate"] = value / 1e9
        elif metric == "state_id":
            entry["state"] = _STATES.get(value, str(value))
        elif metric == "physical_state_id":
            entry["phys"] = _PHYS.get(value, str(value))
        elif metric in _EXPORTER:
            counters = entry["counters"]
            assert isinstance(counters, dict)
            counters[_EXPORTER[metric]] = value
    out = []
    for (dev, port), entry in sorted(ports.items()):
        counters = entry["counters"]
        assert isinstance(counters, dict)
        rate = entry.get("rate")
        state, phys = entry.get("state"), entry.get("phys")
        out.append(PortSample(
            PortKey(host, dev, port), time, MappingProxyType(dict(counters)),
            MappingProxyType(dict.fromkeys(counters, 64)), 1,
            rate if isinstance(rate, float) else None,
            state if isinstance(state, str) else None, phys if isinstance(phys, str) else None,
            tuple(warnings)))
    return out


def _delta(name: str, old: int, new: int, width: int | None, notes: list[str],
           max_delta: float | None = None) -> int | None:
    """Increase of one counter: plain, wrapped, or reset.

    A decrease of a saturating (error or congestion) counter is always a reset. For the data and
    packet counters it is a wrap if the wrapped increase is physically possible (``max_delta``,
    from the link rate) or, without a bound, if the value fell by more than half the range;
    otherwise the counter was reset and the new value is what accrued since.
    """
    if width is not None and width < 64 and old == (1 << width) - 1 and name not in DATA_COUNTERS:
        notes.append(f"{name}: saturated at {old}; rate is a lower bound")
    if new >= old:
        return new - old
    if width is not None and name not in SATURATING:
        wrapped = new + (1 << width) - old
        plausible = wrapped <= max_delta if max_delta is not None else old - new > (1 << width) // 2
        if plausible:
            notes.append(f"{name}: wrapped at {width} bits")
            return wrapped
    notes.append(f"{name}: reset ({old} -> {new}); counting from zero")
    return new


def port_rates(prev: PortSample, cur: PortSample) -> PortRates | None:
    """Rates between two samples of the same port; None (with no exception) if they cannot be compared."""
    if prev.key != cur.key:
        return None
    dt = cur.time - prev.time
    if dt <= 0:
        return None
    notes: list[str] = []
    rates: dict[str, float] = {}
    for name, new in cur.counters.items():
        old = prev.counters.get(name)
        if old is None:
            continue
        width = cur.widths.get(name) or prev.widths.get(name)
        bound = None
        if name in DATA_COUNTERS and cur.rate_gbps:
            bound = cur.rate_gbps * 1e9 * dt / cur.data_scale * 1.05
        d = _delta(name, old, new, width, notes, bound)
        if d is not None:
            rates[name] = d / dt
    xmit = rates.get("port_xmit_data", 0.0) * cur.data_scale / 1e9
    rcv = rates.get("port_rcv_data", 0.0) * cur.data_scale / 1e9
    return PortRates(cur.key, dt, MappingProxyType(rates), xmit, rcv, cur.rate_gbps, cur.state,
                     cur.phys_state, tuple(notes))
