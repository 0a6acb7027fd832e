"""Capacity as ``sreport cluster utilization`` counts it (issue 36 item 2), in GPU-hours.

A node counts for the hours it existed in the window: from its first ``node_states`` row (the
daemon writes one per change of what ``sinfo`` shows, and a ``gone`` row when a node leaves
sinfo) to its ``gone`` row or the window's end; a node added at noon is half a day of capacity,
not a whole one (the report used to multiply the inventory at the end by the window's hours).

Each node's existing GPU-seconds split, per stretch of one recorded state, into:

* **allocated**: what the ledger's segments held on the node (a job's GPUs spread evenly over
  its nodes), first, as sreport counts a job on a draining node as allocated;
* **down**: the rest while the node was down (``down``, ``fail``, not responding);
* **drained**: the rest while drained or draining (sreport's *Down* is down + drained: slurmdbd
  records a drain as a node event);
* **reserved**: the rest while the node was in a reservation (``+reserved``, ``maint``; by CPUs
  sreport counts a plain reservation's time as *Allocated* and a MAINT one's as *PLND Down*; by
  GPUs as *Idle*, a node reservation carrying no GPUs in slurmdbd: docs/report.md);
* **idle**: the rest.

The five add up to the capacity. Without any ``node_states`` row there is nothing to split:
:func:`capacity_split` returns None and the report keeps its inventory × hours.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from railgang.daemon.report.data import NodeRecord, Seg
from railgang.daemon.report.inventory import base_state
from railgang.db.repositories.nodes import GONE  # a node that left sinfo
from railgang.topology import hostnames

_DOWN = ("down", "fail", "failing", "not_responding", "power_down", "powered_down", "reboot")
_DRAIN = ("drain", "drained", "draining")
_RESERVED = ("maint", "reserved", "planned")


@dataclass(frozen=True, slots=True)
class CapacitySplit:
    """GPU-hours of the window; ``capacity`` = the sum of the other five."""

    capacity: float
    allocated: float
    down: float
    drained: float
    reserved: float
    idle: float

    def as_totals(self) -> dict[str, float | None]:
        """The report's totals beside ``allocated_gpu_h`` (which the segments give)."""
        return {"capacity_gpu_h": round(self.capacity, 3),
                **{f"{k}_gpu_h": round(getattr(self, k), 3)
                   for k in ("down", "drained", "reserved", "idle")}}


def kind_of(state: str) -> str:
    """down | drained | reserved | up, from a recorded state (``idle+reserved``, ``down*``...)."""
    words = [base_state(w) for w in state.lower().split("+")]
    if "maint" in words:  # slurmdbd counts a node event inside a MAINT reservation as PLND Down
        return "reserved"
    if any(w in _DOWN for w in words) or state.strip().endswith("*"):
        return "down"
    if any(w in _DRAIN for w in words):
        return "drained"
    if any(w in _RESERVED for w in words):
        return "reserved"
    return "up"


def _held_per_node(segments: Sequence[Seg]) -> dict[str, list[tuple[int, int | None, float]]]:
    out: dict[str, list[tuple[int, int | None, float]]] = defaultdict(list)
    for g in segments:
        nodes = hostnames.expand(g.nodes)
        for n in nodes:
            out[n].append((g.start, g.end, g.gpus / len(nodes)))
    return out


def capacity_split(records: Sequence[NodeRecord], segments: Sequence[Seg], since: int,
                   until: int) -> CapacitySplit | None:
    """The window's capacity, split as the module says; None without node states."""
    if not records:
        return None
    by_node: dict[str, list[NodeRecord]] = defaultdict(list)
    for r in records:  # (node, time) order
        by_node[r.node].append(r)
    held = _held_per_node(segments)
    acc: dict[str, float] = defaultdict(float)
    for node, recs in by_node.items():
        for i, r in enumerate(recs):
            end = recs[i + 1].at if i + 1 < len(recs) else until
            lo, hi = max(r.at, since), min(end, until)
            if hi <= lo or r.state == GONE or r.gpus <= 0:
                continue
            cap = r.gpus * (hi - lo)
            alloc = sum(share * max(0, min(e if e is not None else until, hi) - max(s, lo))
                        for s, e, share in held.get(node, ()))
            alloc = min(alloc, cap)
            kind = kind_of(r.state)
            acc["capacity"] += cap
            acc["allocated"] += alloc
            acc["idle" if kind == "up" else kind] += cap - alloc
    h = {k: v / 3600 for k, v in acc.items()}
    return CapacitySplit(h.get("capacity", 0.0), h.get("allocated", 0.0), h.get("down", 0.0),
                         h.get("drained", 0.0), h.get("reserved", 0.0), h.get("idle", 0.0))


__all__ = ["GONE", "CapacitySplit", "capacity_split", "kind_of"]
