"""Parser for ``ibnetdiscover`` output: the topology file (plain, with or without
``--node-name-map``, with or without ``-g`` grouping) and the ``-p``/``--ports`` report.

Pure: numbered lines in, a frozen ``Discovery`` out. The two forms are told apart by their first
meaningful line. Lines that are neither a device, a link nor known boilerplate are counted with
their numbers (``skipped``), never fatal: a capture with an odd line still yields its fabric, and
the report says what was left out. What the parser cannot work with at all (no device found)
raises ``InputProblem``.

Topology form, as ``infiniband-diags/ibnetdiscover.c`` prints it::

    Switch  36 "S-ec0d9a0300ec8240"   # "SwitchIB Mellanox Technologies" base port 0 lid 48 lmc 0
    [1]     "H-506b4b03003fa9b6"[1](506b4b03003fa9b6)   # "node018 HCA-1" lid 67 4xEDR
    Ca      1 "H-506b4b03003fa9b6"    # "node018 HCA-1"
    [1](506b4b03003fa9b6)  "S-ec0d9a0300ec8240"[1]  # lid 67 lmc 0 "SwitchIB ..." lid 48 4xEDR

Ports form (``-p``), one line per port, each cable seen from both ends::

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )

With ``--node-name-map`` ibnetdiscover renames switches and link peers but keeps the raw
NodeDescription on ``Ca`` lines, so a device's name is the one its peers' link lines give it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from railgang.topology.inputs import InputProblem

__all__ = ["MAX_SKIPPED", "Device", "Discovery", "Link", "link_gbps", "normal_guid", "parse_ibnetdiscover"]

MAX_SKIPPED = 100  # 50 MB of garbage lines must not become a list of a million line numbers
# Give up once this many lines were not understood and they outnumber what was, ten to one: an
# endless stream of text (`yes | railgang topology discover -`) ends in a second, not in minutes.
_GIVE_UP = 10_000

# Gb/s per lane as the IBTA names them (FDR10 is FDR signalling at QDR's data rate).
_LANE_GBPS = {"SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.0, "FDR": 14.0, "EDR": 25.0,
              "HDR": 50.0, "NDR": 100.0, "XDR": 200.0}
_KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router", "SW": "switch", "CA": "ca", "RT": "router"}

_NODE = re.compile(r'^(Switch|Ca|Rt|\?\?\?)\s+(\d+)\s+"(?:[SHR?]-)?(?:0x)?([0-9A-Fa-f]+)"\s*#\s*"(.*)"(.*)$')
_PORT = re.compile(
    r'^\[(\d+)\](?:\[ext \d+\])?(?:\((?:0x)?[0-9A-Fa-f]+\))?\s*"([SHR?])-(?:0x)?([0-9A-Fa-f]+)"\[(\d+)\]'
    r'(?:\[ext \d+\])?\s*(?:\((?:0x)?[0-9A-Fa-f]+\))?\s*#(.*)$')
_PEER = re.compile(r'"(.*)"\s+lid\s+\d+\s+(\d+x|\?+)\s*([A-Za-z0-9?]+)')
_PORTS_LINE = re.compile(
    r"^(SW|CA|RT|\?\?)\s+(\d+)\s+(\d+)\s+0x([0-9A-Fa-f]+)\s+(\d+x|\?+)\s+(\S+)"
    r"(?:\s+-\s+(SW|CA|RT|\?\?)\s+\d+\s+(\d+)\s+0x([0-9A-Fa-f]+)\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\))?"
    r"(?:\s+'(.*)'|\s+(\S.*))?\s*$")
_BOILERPLATE = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid)=|^(Chassis|Non-Chassis|Hostname:)")


@dataclass(frozen=True)
class Device:
    """One InfiniBand node: ``kind`` is switch, ca, router or unknown; ``guid`` 16 hex digits."""

    guid: str
    kind: str
    description: str
    ports: int
    line: int


@dataclass(frozen=True)
class Link:
    """One cable, seen once: ``a`` port ``a_port`` to ``b`` port ``b_port``, at ``gbps``."""

    a: str
    a_port: int
    b: str
    b_port: int
    width: str
    speed: str
    gbps: float | None
    line: int


@dataclass(frozen=True)
class Discovery:
    """Everything read from one capture, plus the lines that were not understood."""

    path: str
    form: str
    devices: Mapping[str, Device]
    links: tuple[Link, ...]
    skipped: tuple[int, ...]  # numbers of the first MAX_SKIPPED lines not understood
    skipped_count: int = 0  # all of them

    def neighbours(self) -> dict[str, list[tuple[str, Link]]]:
        """Device GUID -> (peer GUID, link) for every cable."""
        out: dict[str, list[tuple[str, Link]]] = {g: [] for g in self.devices}
        for link in self.links:
            out.setdefault(link.a, []).append((link.b, link))
            out.setdefault(link.b, []).append((link.a, link))
        return out


def normal_guid(text: str) -> str:
    """``0x8f10400411a08`` / ``0008F10400411A08`` -> ``0008f10400411a08``."""
    text = text.lower()
    return (text[2:] if text.startswith("0x") else text).zfill(16)


def link_gbps(width: str, speed: str) -> float | None:
    """``4x`` + ``EDR`` -> 100.0; None when either is unknown (``???``, a down port)."""
    lanes = width[:-1] if width.endswith("x") else ""
    per_lane = _LANE_GBPS.get(speed.upper())
    if not lanes.isdigit() or per_lane is None:
        return None
    return int(lanes) * per_lane


class _Builder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.devices: dict[str, Device] = {}
        self.peer_names: dict[str, str] = {}
        self.links: dict[tuple[tuple[str, int], tuple[str, int]], Link] = {}
        self.skipped: list[int] = []
        self.skipped_count = 0

    def skip(self, number: int) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_SKIPPED:
            self.skipped.append(number)
        if self.skipped_count >= _GIVE_UP and self.skipped_count > 10 * (len(self.devices) + len(self.links)):
            raise InputProblem(f"{self.skipped_count:,} lines are not ibnetdiscover output (the first is line "
                               f"{self.skipped[0]}); is this the right file?", path=self.path, line=number)

    def device(self, guid: str, kind: str, description: str, ports: int, line: int) -> None:
        old = self.devices.get(guid)
        if old is None or (old.kind == "unknown" and kind != "unknown"):
            self.devices[guid] = Device(guid, kind, description.strip(), ports, line)

    def link(self, a: str, a_port: int, b: str, b_port: int, width: str, speed: str, line: int) -> None:
        ends = tuple(sorted(((a, a_port), (b, b_port))))
        key = (ends[0], ends[1])
        old, gbps = self.links.get(key), link_gbps(width, speed)
        # Each cable is printed from both ends; should they disagree, the slower reading stands.
        if old is None or (gbps is not None and (old.gbps is None or gbps < old.gbps)):
            self.links[key] = Link(ends[0][0], ends[0][1], ends[1][0], ends[1][1], width, speed, gbps,
                                   old.line if old else line)

    def result(self, form: str) -> Discovery:
        devices = {}
        for guid, dev in self.devices.items():
            name = self.peer_names.get(guid)
            devices[guid] = dev if name is None or name == dev.description else Device(
                dev.guid, dev.kind, name, dev.ports, dev.line)
        return Discovery(self.path, form, MappingProxyType(devices),
                         tuple(sorted(self.links.values(), key=lambda lk: lk.line)), tuple(self.skipped),
                         self.skipped_count)


def _topology_form(lines: Iterable[tuple[int, str]], b: _Builder) -> None:
    current: str | None = None
    for number, raw in lines:
        line = raw.strip()
        if not line or line.startswith("#") or _BOILERPLATE.match(line):
            continue
        m = _NODE.match(line)
        if m:
            current = normal_guid(m.group(3))
            b.device(current, _KINDS.get(m.group(1), "unknown"), m.group(4), int(m.group(2)), number)
            continue
        m = _PORT.match(line)
        if m and current is not None:
            peer = normal_guid(m.group(3))
            p = _PEER.search(m.group(5))
            if p is None:
                b.skip(number)
                continue
            kind = {"S": "switch", "H": "ca", "R": "router"}.get(m.group(2), "unknown")
            if peer not in b.devices:
                b.device(peer, kind, p.group(1), 0, number)
            b.peer_names.setdefault(peer, p.group(1).strip())
            b.link(current, int(m.group(1)), peer, int(m.group(4)), p.group(2), p.group(3), number)
            continue
        b.skip(number)


def _ports_form(lines: Iterable[tuple[int, str]], b: _Builder) -> None:
    for number, raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _PORTS_LINE.match(line)
        if m is None:
            b.skip(number)
            continue
        guid = normal_guid(m.group(4))
        name = m.group(10) if m.group(10) is not None else (m.group(12) or m.group(13) or "")
        b.device(guid, _KINDS.get(m.group(1), "unknown"), name, 0, number)
        if m.group(7) is None:
            continue  # a port with nothing attached
        peer = normal_guid(m.group(9))
        b.device(peer, _KINDS.get(m.group(7), "unknown"), m.group(11), 0, number)
        b.link(guid, int(m.group(3)), peer, int(m.group(8)), m.group(5), m.group(6), number)


def parse_ibnetdiscover(lines: Iterable[tuple[int, str]], path: str = "<ibnetdiscover>") -> Discovery:
    """Parse numbered lines (``railgang.topology.inputs.iter_lines``) of either form.

    InputProblem when the input is empty or holds no InfiniBand device at all.
    """
    it = iter(lines)
    head: list[tuple[int, str]] = []
    form = None
    for number, raw in it:
        head.append((number, raw))
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        form = "ports" if _PORTS_LINE.match(line) else "topology"
        break
    if form is None:
        raise InputProblem("empty: no ibnetdiscover output (run `ibnetdiscover > FILE` on a fabric node)",
                           path=path)
    b = _Builder(path)
    (_ports_form if form == "ports" else _topology_form)(_chain(head, it), b)
    if not b.devices:
        first = b.skipped[0] if b.skipped else None
        raise InputProblem("no InfiniBand device found: not ibnetdiscover output (plain, "
                           "--node-name-map or -p form)", path=path, line=first)
    return b.result(form)


def _chain(head: list[tuple[int, str]], rest: Iterable[tuple[int, str]]) -> Iterable[tuple[int, str]]:
    yield from head
    yield from rest
