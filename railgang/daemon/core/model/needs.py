"""Needs, not SKUs (DESIGN R-S10): what a job needs from a GPU node, and which nodes meet it.

A job states capabilities (``gpumem>=40G,nvlink``) instead of a GPU model, so the scheduler may
fill every pool that qualifies and backfill the ones that are idle. Pure: parse, render, match.

Grammar (docs/needs.md; ``job_submit.lua`` accepts exactly the same text)::

    needs := need ("," need)*            # each kind at most once, order free
    need  := "type=" T ("/" T)*          # GPU type in a set: type=a100/h100 (typed GRES name)
           | "gpumem>=" N ["G" | "GB"]   # memory per GPU in GB: gpumem>=40G
           | "nvlink"                    # GPUs of a node joined by NVLink
           | "net=" I ("/" I)*           # node interconnect in a set: net=ib/roce (ib, roce, eth)
           | "cc>=" MAJOR ["." MINOR]    # CUDA compute capability: cc>=8.0

Case and blanks are ignored. :meth:`Needs.render` gives the canonical text (kinds in the order
above, sets sorted), which is what the job's tag carries; ``parse_needs(n.render()) == n``.

A node's :class:`GpuFacts` come from Slurm (typed GRES ``gpu:a100:8`` and node features, see
``daemon/slurm/cli/facts.py``); an unknown fact never meets a need that asks about it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from railgang.daemon.core.model.room import NO_ASK, Ask

__all__ = [
    "NETWORKS",
    "NO_NEEDS",
    "UNKNOWN_FACTS",
    "GpuFacts",
    "Needs",
    "NeedsError",
    "describe",
    "eligible_nodes",
    "fleet_summary",
    "parse_needs",
]

NETWORKS = ("eth", "ib", "roce")  # interconnects a node may name (sorted: messages list them so)
MAX_GPU_MEM_GB = 4096.0  # larger is a typo (MB for GB), not a GPU
_TYPE = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")  # a Slurm GRES type name
_MEM = re.compile(r"^(\d+(?:\.\d+)?)(g|gb)?$")
_CC = re.compile(r"^(\d{1,2})(?:\.(\d))?$")
HELP = "type=A100/H100, gpumem>=40G, nvlink, net=ib/roce, cc>=8.0 (comma-separated)"


class NeedsError(ValueError):
    """A needs text that does not follow the grammar; ``str()`` is the one-line message."""


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What one node's GPUs offer, as far as needs are concerned (defaults: unknown)."""

    gpu_type: str = ""  # typed GRES name, lower case ("a100"); "" = untyped GRES
    gpu_mem_gb: float = 0.0  # memory per GPU; 0 = unknown
    nvlink: bool = False  # GPUs of the node joined by NVLink (a node feature says so)
    interconnect: str = ""  # one of NETWORKS, "" = unknown
    compute_capability: tuple[int, int] | None = None  # CUDA (major, minor); None = unknown


UNKNOWN_FACTS = GpuFacts()


@dataclass(frozen=True, slots=True)
class Needs:
    """What a job needs from every node it runs on; the default needs nothing."""

    gpu_types: frozenset[str] = frozenset()  # empty = any type
    min_gpu_mem_gb: float = 0.0
    nvlink: bool = False
    interconnects: frozenset[str] = frozenset()  # empty = any
    min_compute_capability: tuple[int, int] | None = None
    # Slurm's own rules (docs/slurm-backend.md, "Slurm's own rules"): the only nodes the job may
    # run on (its partitions, less its --exclude list, with its --constraint features); None:
    # any node. Not part of the tag's grammar (render leaves it out): the backend reads it from
    # the job's Slurm record every cycle
    nodes: frozenset[str] | None = None
    where: str = ""  # those nodes as reasons name them: "of partition gpu outside its --exclude list"
    # CPUs and memory it asks of each node (model/room.py): bounds the GPUs a node's free room
    # lets it take; like ``nodes``, read from the job's Slurm record, not part of the tag
    ask: Ask = NO_ASK

    @property
    def empty(self) -> bool:
        return self is NO_NEEDS or self == NO_NEEDS  # the shared NO_NEEDS, or one equal to it

    def render(self) -> str:
        """The canonical text (``""`` for no needs)."""
        parts = []
        if self.gpu_types:
            parts.append("type=" + "/".join(sorted(self.gpu_types)))
        if self.min_gpu_mem_gb:
            parts.append(f"gpumem>={self.min_gpu_mem_gb:g}G")
        if self.nvlink:
            parts.append("nvlink")
        if self.interconnects:
            parts.append("net=" + "/".join(sorted(self.interconnects)))
        if self.min_compute_capability is not None:
            parts.append("cc>={}.{}".format(*self.min_compute_capability))
        return ",".join(parts)

    def on(self) -> str:
        """The nodes these needs leave, as a reason names them: ``the nodes that meet
        gpumem>=40G``, ``the nodes of partition gpu outside its --exclude list``, or both."""
        where = (self.where or "Slurm lets it use") if self.nodes is not None else ""
        text = self.render()
        return " ".join(p for p in ("the nodes", where, f"that meet {text}" if text else "") if p)

    def unmet(self, facts: GpuFacts) -> tuple[str, ...]:
        """The needs (rendered one by one) that ``facts`` fail; empty when all are met."""
        out = []
        if self.gpu_types and facts.gpu_type not in self.gpu_types:
            out.append("type=" + "/".join(sorted(self.gpu_types)))
        if self.min_gpu_mem_gb and facts.gpu_mem_gb < self.min_gpu_mem_gb:
            out.append(f"gpumem>={self.min_gpu_mem_gb:g}G")
        if self.nvlink and not facts.nvlink:
            out.append("nvlink")
        if self.interconnects and facts.interconnect not in self.interconnects:
            out.append("net=" + "/".join(sorted(self.interconnects)))
        cc = self.min_compute_capability
        if cc is not None and (facts.compute_capability is None or facts.compute_capability < cc):
            out.append("cc>={}.{}".format(*cc))
        return tuple(out)

    def met_by(self, facts: GpuFacts) -> bool:
        return not self.unmet(facts)


NO_NEEDS = Needs()


def _set(kind: str, value: str, item: str, ok: Iterable[str] | None = None) -> frozenset[str]:
    names = value.split("/")
    for name in names:
        if not name or not _TYPE.match(name):
            raise NeedsError(f"'{item}': '{name}' is not a {kind} name (letters, digits, _ . -)")
        if ok is not None and name not in ok:
            raise NeedsError(f"'{item}': unknown interconnect '{name}' (one of {', '.join(NETWORKS)})")
    return frozenset(names)


def parse_needs(text: str) -> Needs:
    """Parse ``text`` (grammar above); ``""`` is no needs. Raises :class:`NeedsError`."""
    body = re.sub(r"\s+", "", text).lower()
    if not body:
        return NO_NEEDS
    fields: dict[str, object] = {}
    key: str
    value: object
    for item in body.split(","):
        if not item:
            raise NeedsError(f"an empty need in '{text.strip()}' (two commas?); needs are {HELP}")
        if item == "nvlink":
            key, value = "nvlink", True
        elif item.startswith("type="):
            key, value = "gpu_types", _set("GPU type", item[5:], item)
        elif item.startswith("net="):
            key, value = "interconnects", _set("interconnect", item[4:], item, NETWORKS)
        elif item.startswith("gpumem>="):
            m = _MEM.match(item[8:])
            gb = float(m.group(1)) if m else 0.0
            if m is None or not 0 < gb <= MAX_GPU_MEM_GB:
                raise NeedsError(f"'{item}': memory per GPU must be a number of GB in "
                                 f"(0, {MAX_GPU_MEM_GB:g}], e.g. gpumem>=40G")
            key, value = "min_gpu_mem_gb", gb
        elif item.startswith("cc>="):
            c = _CC.match(item[4:])
            if c is None or int(c.group(1)) < 1:
                raise NeedsError(f"'{item}': compute capability is MAJOR.MINOR, e.g. cc>=8.0")
            key, value = "min_compute_capability", (int(c.group(1)), int(c.group(2) or 0))
        elif item in ("gpumem", "cc"):
            raise NeedsError(f"'{item}' needs a bound, e.g. {'cc>=8.0' if item == 'cc' else 'gpumem>=40G'}"
                             " (quote the option: a bare > is a shell redirect)")
        else:
            raise NeedsError(f"'{item}' is not a need; needs are {HELP}")
        if key in fields:
            raise NeedsError(f"'{item}': {item.split('=')[0].split('>')[0]} is given twice")
        fields[key] = value
    return Needs(**fields)  # type: ignore[arg-type]


def describe(facts: GpuFacts) -> str:
    """``a100 80G nvlink ib cc8.0``: a node's facts the way refusals and reasons list them."""
    parts = [facts.gpu_type or "untyped",
             f"{facts.gpu_mem_gb:g}G" if facts.gpu_mem_gb else "mem?"]
    if facts.nvlink:
        parts.append("nvlink")
    if facts.interconnect:
        parts.append(facts.interconnect)
    if facts.compute_capability is not None:
        parts.append("cc{}.{}".format(*facts.compute_capability))
    return " ".join(parts)


def eligible_nodes(needs: Needs, facts: Mapping[str, GpuFacts]) -> frozenset[str]:
    """The nodes whose facts meet ``needs`` and that Slurm lets the job use (every node for no
    needs)."""
    if needs.empty:
        return frozenset(facts)
    allowed = needs.nodes
    return frozenset(n for n, f in facts.items()
                     if (allowed is None or n in allowed) and needs.met_by(f))


def fleet_summary(nodes: Iterable[tuple[int, GpuFacts]]) -> str:
    """``4 nodes x 8 GPUs a100 80G nvlink ib; 4 nodes x 8 GPUs v100 32G eth``: what exists,
    one entry per kind of node (for a refusal or a pending reason), most GPUs first."""
    kinds: dict[tuple[int, GpuFacts], int] = {}
    for gpus, f in nodes:
        kinds[(gpus, f)] = kinds.get((gpus, f), 0) + 1
    rows = sorted(kinds.items(), key=lambda kv: (-kv[1] * kv[0][0], describe(kv[0][1])))
    return "; ".join(f"{count} node{'s' if count > 1 else ''} x {gpus} GPUs {describe(f)}"
                     for (gpus, f), count in rows) or "no nodes"
